"""A table's expectations (``table_options``' ``expectations``): named checks of the typed row
image of each insert and update, as Databricks' ``EXPECT ... ON VIOLATION``.

- ``warn``: the change is applied; the violations are counted.
- ``drop``: the change is a dead letter, its reason naming the rule, like a value that does not
  fit its column (it joins the typing errors, ``_type_error``, so every later step leaves it out).
- ``fail``: nothing of the table's batch is applied; its changes are dead letters with the rule
  and a sample key, and the batch's other tables flow.

Counted per rule in the table's summary (and so in ``_cdc_batches``, the metrics and the status
page). Deletes are not checked: they carry no image to hold to a rule. A table with
expectations is applied by a plan of its own, where its typed columns have their own names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import UPSERT
from cdc_ingest.stages import stage
from cdc_ingest.table_options import Expectation, TableDesignError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdc_ingest.schema.target import TargetTable


class ExpectationFailed(RuntimeError):
    """A change violates an expectation whose ``on_violation`` is ``fail``; ``counts``: every
    rule's violations, as the table's summary holds them."""

    def __init__(self, message: str, counts: dict[str, dict[str, Any]]) -> None:
        super().__init__(message)
        self.counts = counts


def _violated(rule: Expectation) -> Column:
    """Whether a typed change violates ``rule``: an upsert whose check is false."""
    holds = F.coalesce(F.expr(f"({rule.check})").cast("boolean"), F.lit(True))
    return (F.col("_cdc_kind") == UPSERT) & ~holds


def with_dropped_changes(typed: DataFrame, target: TargetTable) -> DataFrame:
    """``typed`` with each violation of a ``drop`` rule as the change's error (the first rule's,
    after any typing error)."""
    dropping = [r for r in target.expectations if r.on_violation == "drop"]
    if not dropping:
        return typed
    reasons = [F.when(_violated(r), F.lit(f"{r.text} failed")) for r in dropping]
    try:
        return typed.withColumn("_type_error", F.coalesce(F.col("_type_error"), *reasons))
    except (AnalysisException, ParseException) as exc:
        raise _not_a_check(target, dropping, exc) from None


def check_expectations(typed: DataFrame, target: TargetTable) -> dict[str, dict[str, Any]]:
    """Each rule's violations among ``typed`` (the table's typed changes), by rule name.

    Raises:
        ExpectationFailed: a ``fail`` rule is violated; with the rule, how many changes and the
            key of one of them.
        TableDesignError: a check is not a boolean expression over the table's columns.
    """
    rules = list(target.expectations)
    if not rules:
        return {}
    try:
        sums = [F.sum(F.when(_violated(r), 1).otherwise(0)).alias(r.name) for r in rules]
        with stage("check expectations"):
            [counts] = typed.agg(*sums).collect()
    except (AnalysisException, ParseException) as exc:
        raise _not_a_check(target, rules, exc) from None
    found = {
        r.name: {"on_violation": r.on_violation, "violations": counts[r.name] or 0} for r in rules
    }
    for rule in rules:
        violations = found[rule.name]["violations"]
        if rule.on_violation == "fail" and violations:
            [sample] = typed.where(_violated(rule)).select(*target.keys).limit(1).collect()
            key = ", ".join(f"{k}={sample[k]!r}" for k in target.keys) or "no key"
            raise ExpectationFailed(
                f"{rule.text} failed for {violations} changes (on_violation: fail), e.g. {key}: "
                "nothing of the table's batch was applied",
                found,
            )
    return found


def _not_a_check(target: TargetTable, rules: list[Expectation], exc: Exception) -> TableDesignError:
    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    named = ", ".join(f"{r.name} ({r.check})" for r in rules)
    return TableDesignError(
        f"expectations of table {target.name} are not Spark SQL boolean expressions over its "
        f"columns: {named}: {first}"
    )
