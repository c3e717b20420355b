"""Tables applied each by a plan of its own, several at once, and what a table's refusal costs.

A table is applied alone when it does not fit a group (``WritePolicy.fits_a_group``: 100,000
changes or more, keys moved, values not sent, refused columns): its typing, collapse,
classification and MERGE are Spark jobs of its own, whose driver work (planning, Iceberg's scan
planning and commits) leaves cores idle that another table's jobs fill. So such tables are applied
up to ``concurrent_writes.WRITERS`` at once, each still committed on its own and refused on its
own; their tombstones go to the namespace's one ``_cdc_tombstones`` table one commit at a time
(``keyed.apply_table``). Tables with statements in the batch are not among them: they are applied
first, one after another, in stream order (``segmented``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from cdc_ingest.apply.concurrent_writes import write_each
from cdc_ingest.apply.expectations import ExpectationFailed
from cdc_ingest.apply.segmented import TableContext, apply_segment, dead_letters
from cdc_ingest.schema.evolution import SchemaChangeHeld, ignored_rows
from cdc_ingest.schema.target import TargetTable
from cdc_ingest.state.summary import TableSummary
from cdc_ingest.state.tables import qualified
from cdc_ingest.table_options import TableDesignError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdc_ingest.state.summary import RunSummary

# What makes a table's failure its own (the batch's other tables flow): anything else is the
# catalog's or the engine's, and fails the batch.
REFUSED = (AnalysisException, TableDesignError, ExpectationFailed)


@dataclass(frozen=True)
class AloneTable:
    """A prepared table applied by a plan of its own.

    Attributes:
        target: the table.
        created: whether this run created it.
        rows: how many of the batch's changes are aimed at it.
        changes: the changes it reads (the batch's, or with its two-message updates paired).
        fan_out: whether deletes naming no table apply to it too.
    """

    target: TargetTable
    created: bool
    rows: int
    changes: DataFrame
    fan_out: bool = False


def apply_alone_tables(
    ctx: TableContext,
    tables: list[AloneTable],
    changes: DataFrame,
    summary: RunSummary,
) -> list[DataFrame]:
    """Apply each of ``tables``, several at once; returns their dead letters. Counted into
    ``summary`` in ``tables``' order, once every table is applied."""
    done: dict[str, tuple[TableSummary, DataFrame | None, int]] = {}

    def write(table: AloneTable) -> None:
        target = table.target
        table_summary, bad = apply_plain(
            ctx, target, table.created, table.rows, table.changes, table.fan_out
        )
        ignored = 0
        if not ctx.policy(target.name).adds_columns:
            ignored = ignored_rows(ctx.spark, changes, target.name, target.identifier)
        done[target.name] = (table_summary, bad, ignored)

    refusals = write_each(ctx.spark, tables, write, _table_name, REFUSED)
    dead: list[DataFrame] = []
    for table in tables:
        name = table.target.name
        if name in refusals:
            table_summary, refused = refuse_table(ctx, changes, name, table.rows, refusals[name])
            dead.append(refused)
        else:
            table_summary, bad, ignored = done[name]
            summary.ignored_values += ignored
            if bad is not None:
                dead.append(bad)
        account(summary, table_summary)
    return dead


def _table_name(table: AloneTable) -> str:
    return table.target.name


def apply_plain(
    ctx: TableContext,
    target: TargetTable,
    created: bool,
    rows: int,
    changes: DataFrame,
    fan_out: bool,
) -> tuple[TableSummary, DataFrame | None]:
    """One prepared table without statements in the batch: one segment (none if its source was
    dropped)."""
    if target.source_dropped:
        return TableSummary(target.name, messages=rows, source_dropped=rows), None
    mine = changes
    if fan_out:
        mine = changes.withColumn("_cdc_target", F.coalesce("_cdc_target", F.lit(target.name)))
    table_summary, bad = apply_segment(ctx, target, created, rows, mine)
    table_summary.design_changes += target.design_changes
    return table_summary, bad


def account(summary: RunSummary, table_summary: TableSummary) -> None:
    """Count a table's outcome into the run's."""
    if table_summary.messages or table_summary.created or table_summary.dead_lettered:
        summary.tables[table_summary.table] = table_summary
    summary.messages -= table_summary.dead_lettered
    summary.dead_lettered += table_summary.dead_lettered


def why(exc: Exception) -> str:
    """A refusal's reason: the exception's first line (a table a schema policy holds says
    itself why it waits)."""
    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else type(exc).__name__
    return first if isinstance(exc, SchemaChangeHeld) else f"could not be applied: {first}"


def _committed_in_batch(ctx: TableContext, name: str) -> bool:
    """Whether a commit of this batch already changed the table (then it is not refused whole)."""
    identifier = qualified(ctx.catalog, ctx.namespace, name)
    if name not in ctx.existing and not ctx.spark.catalog.tableExists(identifier):
        return False
    mine = ctx.spark.sql(f"SELECT summary FROM {identifier}.snapshots").where(
        ctx.batch.snapshot_filter()
    )
    return bool(mine.limit(1).count())


def refuse_table(
    ctx: TableContext,
    changes: DataFrame,
    name: str,
    rows: int,
    exc: Exception,
    never_applied: bool = False,
) -> tuple[TableSummary, DataFrame]:
    """Every change aimed at a table, as dead letters with one reason: the table's own fault (a
    mirror altered by hand, a name or type Spark refuses, table options that do not fit its
    columns), as long as none of its changes were committed; the other tables of the batch flow.
    Raises ``exc`` again when a commit of the batch changed the table already, unless none of
    the table's changes can have been applied (``never_applied``).
    """
    # A table whose creation waited for its rows is made now, empty, as a refused table always
    # was (and so that the check below finds it).
    ctx.writer.create_pending(qualified(ctx.catalog, ctx.namespace, name))
    if not never_applied and _committed_in_batch(ctx, name):
        raise exc
    reason = f"table {name} {why(exc)}"
    letters = dead_letters(changes.where(F.col("_cdc_target") == name), reason, name)
    counted = exc.counts if isinstance(exc, ExpectationFailed) else {}
    return TableSummary(name, dead_lettered=rows, expectations=counted), letters
