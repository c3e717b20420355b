"""DDL records applied to the mirror at their position in the stream.

A table whose batch holds DDL is applied in segments: the changes before the first statement with
the old schema, then the statement, then the changes up to the next one, and so on. A statement is
applied whole or not at all: one the parser cannot read, or one that would narrow a column's type,
changes nothing and is reported (summary, ``_cdc_ddl_history``, task log). The pipeline's
``schema_changes`` policy decides the rest: ``evolve`` applies, ``ignore`` keeps every table's
schema (and drops the values of columns the table lacks), ``fail`` stops the batch before any
change.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DDL
from cdc_ingest.schema.ddl_parse import (
    ADD_COLUMN,
    CREATE_TABLE,
    DROP_COLUMN,
    DROP_TABLE,
    MODIFY_COLUMN,
    NO_CHANGE,
    RENAME_COLUMN,
    RENAME_TABLE,
    TRUNCATE_TABLE,
    ParsedDdl,
    SchemaChange,
    lowercase_columns,
    parse_ddl,
)
from cdc_ingest.schema.names import render_targets
from cdc_ingest.schema.types import widens
from cdc_ingest.state.tables import SYSTEM_COLUMNS, qualified, quote, table_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

    from cdc_ingest.config import PipelineConfig
    from cdc_ingest.schema.target import TargetInventory

EVOLVE, IGNORE, FAIL = "evolve", "ignore", "fail"
POLICIES = (EVOLVE, IGNORE, FAIL)
APPLIED, UNCHANGED, REJECTED, IGNORED, REFUSED = (
    "applied",
    "no_change",
    "rejected",
    "ignored",
    "failed",
)
SEGMENT = "_cdc_segment"


class SchemaChangeRefused(RuntimeError):
    """The pipeline's policy is ``fail`` and the batch would change a table's schema."""


@dataclass
class DdlEvent:
    """One DDL record of the batch, where it is in the stream, and what became of it."""

    file_idx: int
    line: int
    row: int
    target: str
    statement: str
    parsed: ParsedDdl
    status: str = ""
    detail: str = ""
    renamed_to: str | None = None  # a RENAME TABLE's new name, as a target table name
    # Its stored ordering value, when statements are placed by it (Decoder.statements_apart).
    order: bytes | None = None

    @property
    def position(self) -> tuple[int, int, int]:
        """Landing position: file, line, row (what names the statement in commit notes)."""
        return (self.file_idx, self.line, self.row)

    @property
    def stream_key(self) -> tuple[bytes, tuple[int, int, int]]:
        """Where it takes effect: by its ordering value when it has one, else where it landed."""
        return (self.order or b"", self.position)

    @property
    def changes_schema(self) -> bool:
        """Whether applying it would change a table (anything but index/comment clauses)."""
        return self.parsed.error is not None or any(
            c.action != NO_CHANGE for c in self.parsed.changes
        )


def collect_ddl(
    cached: DataFrame, template: str, lowercase_names: bool = False, by_order: bool = False
) -> list[DdlEvent]:
    """The batch's DDL records in stream order, parsed.

    The table a statement names decides which mirror it changes (named through the pipeline's
    ``table`` template with the message's database and schema), not the table the message is
    filed under: a Canal DDL message on ``t`` may carry ``DROP TABLE t2``. A statement naming no
    table stays with the message's table.

    Args:
        cached: the cached batch.
        template: the pipeline's ``table`` template.
        lowercase_names: name columns by their lowercase (``column_names: lowercase``).
        by_order: place statements by their ordering value (``Decoder.statements_apart``).
    """
    rows = (
        cached.where(F.col("_cdc_error").isNull() & (F.col("_cdc_kind") == DDL))
        .select(
            "_cdc_file_idx",
            "_cdc_line",
            "row_in_message",
            "_cdc_target",
            "ddl",
            "_cdc_ddl_scope",
            "_cdc_order",
        )
        .collect()
    )

    def place(r: Row) -> tuple[bytes, int, int, int]:
        return (bytes(r["_cdc_order"]) if by_order else b"", r[0], r[1], r[2])

    rows = sorted(rows, key=place)
    parsed_rows = []
    named: list[tuple[str | None, str | None, str | None]] = []
    for r in rows:
        statement = r["ddl"] or ""
        parsed = (
            parse_ddl(statement)
            if statement.strip()
            else ParsedDdl(statement, None, (), "empty statement")
        )
        if lowercase_names:
            parsed = lowercase_columns(parsed)
        db, schema = r["_cdc_ddl_scope"] or (None, None)
        renamed = [c.new_name for c in parsed.changes if c.action == RENAME_TABLE and c.new_name]
        named += [(db, schema, parsed.table)] + [(db, schema, n) for n in renamed[:1]]
        parsed_rows.append((r, statement, parsed, bool(renamed)))
    names = iter(render_targets(cached.sparkSession, template, named))
    events = []
    for r, statement, parsed, renames in parsed_rows:
        target = next(names)
        if parsed.table is None:
            target = r["_cdc_target"] or ""
        event = DdlEvent(r[0], r[1], r[2], target, statement, parsed)
        if by_order:
            event.order = bytes(r["_cdc_order"])
        if renames:
            event.renamed_to = next(names)
        events.append(event)
    return events


def segment_of(events: list[DdlEvent]) -> Column:
    """For each record, how many of the table's statements precede it in the stream."""
    if events and all(e.order is not None for e in events):
        stored = F.col("_cdc_order")
        later = [F.when(stored > F.lit(e.order), 1).otherwise(0) for e in events]
        return reduce(operator.add, later)
    position = F.array(
        F.col("_cdc_file_idx").cast("bigint"),
        F.col("_cdc_line").cast("bigint"),
        F.col("row_in_message").cast("bigint"),
    )
    after = [
        F.when(position > F.array(*[F.lit(p).cast("bigint") for p in e.position]), 1).otherwise(0)
        for e in events
    ]
    total = after[0]
    for term in after[1:]:
        total = total + term
    return total


def _check(change: SchemaChange, columns: dict[str, str], keys: tuple[str, ...]) -> str | None:
    """Why a change cannot be applied to a table with these columns, or None."""
    name = change.column or ""
    if change.action in (MODIFY_COLUMN, RENAME_COLUMN) and change.column_type and name in columns:
        old, new = columns[name], change.column_type.spark_type
        if old != new and not widens(old, new):
            return f"column '{name}': {old} -> {new} would narrow or change the type"
    if change.action == DROP_COLUMN and name in keys:
        return f"column '{name}' is part of the key"
    if change.action == RENAME_COLUMN and change.new_name in columns and name in columns:
        return f"column '{change.new_name}' exists already"
    return None


def plan_statement(
    spark: SparkSession, identifier: str, keys: tuple[str, ...], event: DdlEvent
) -> tuple[str, str, list[str]]:
    """What one parsed statement does to an existing table, whole or not at all.

    Returns:
        (status, detail) for the DDL history, and the SQL statements that do it (none when it is
        rejected or changes nothing).
    """
    parsed = event.parsed
    if parsed.error is not None:
        return REJECTED, parsed.error, []
    columns = {n: t for n, t in table_columns(spark, identifier).items() if n not in SYSTEM_COLUMNS}
    for change in parsed.changes:
        problem = _check(change, columns, keys)
        if problem:
            return REJECTED, f"{change.detail}: {problem}; nothing of the statement was applied", []
    done: list[str] = []
    statements: list[str] = []
    for change in parsed.changes:
        name = change.column or ""
        if change.action == ADD_COLUMN and name not in columns and change.column_type:
            statements.append(
                f"ALTER TABLE {identifier} ADD COLUMN {quote(name)} {change.column_type.spark_type}"
            )
            columns[name] = change.column_type.spark_type
            done.append(f"added {name} {change.column_type.spark_type}")
            if change.default is not None:
                # The rows the table holds took the default in the source: so they do here.
                statements.append(
                    f"UPDATE {identifier} SET {quote(name)} ="
                    f" CAST({change.default} AS {change.column_type.spark_type})"
                )
                done.append(f"existing rows set to its default {change.default}")
        elif change.action == DROP_COLUMN and name in columns:
            statements.append(f"ALTER TABLE {identifier} DROP COLUMN {quote(name)}")
            del columns[name]
            done.append(f"dropped {name}")
        elif change.action == RENAME_COLUMN and name in columns and change.new_name:
            statements.append(
                f"ALTER TABLE {identifier} RENAME COLUMN {quote(name)} TO {quote(change.new_name)}"
            )
            columns[change.new_name] = columns.pop(name)
            done.append(f"renamed {name} to {change.new_name}")
            name = change.new_name
        if (
            change.action in (MODIFY_COLUMN, RENAME_COLUMN)
            and change.column_type
            and name in columns
        ):
            new = change.column_type.spark_type
            if columns[name] != new and widens(columns[name], new):
                statements.append(f"ALTER TABLE {identifier} ALTER COLUMN {quote(name)} TYPE {new}")
                done.append(f"widened {name} to {new}")
                columns[name] = new
        elif change.action == TRUNCATE_TABLE:
            statements.append(f"DELETE FROM {identifier}")
            done.append("removed every row")
    if not done:
        unchanged = ", ".join(c.detail for c in parsed.changes)
        return UNCHANGED, f"nothing to change in Iceberg ({unchanged})", []
    return APPLIED, "; ".join(done), statements


def table_level(event: DdlEvent) -> str | None:
    """The table-level action of a statement (create, rename, drop), if it has one."""
    for change in event.parsed.changes:
        if change.action in (CREATE_TABLE, RENAME_TABLE, DROP_TABLE):
            return change.action
    return None


def ignored_rows(spark: SparkSession, changes: DataFrame, name: str, identifier: str) -> int:
    """Changes to a table carrying columns it lacks (``ignore``: those values are not applied)."""
    columns = list(table_columns(spark, identifier))
    unknown = F.exists(F.map_keys("image"), lambda k: ~k.isin(*columns))
    return changes.where((F.col("_cdc_target") == name) & unknown).count()


def check_policy(
    spark: SparkSession,
    catalog: str,
    pipeline: PipelineConfig,
    existing: set[str],
    tables: dict[str, TargetInventory],
    events: list[DdlEvent],
) -> None:
    """Mark the events the policy keeps from applying; with ``fail``, refuse the batch.

    Raises:
        SchemaChangeRefused: the policy is ``fail`` and a statement or a message would change an
            existing table's schema; nothing has been applied.
    """
    if pipeline.schema_changes == IGNORE:
        for event in events:
            event.status, event.detail = IGNORED, "schema_changes: ignore"
        return
    if pipeline.schema_changes != FAIL:
        return
    problems = [
        f"{e.target or e.parsed.table}: {' '.join(e.statement.split())[:120]!r}"
        for e in events
        if e.changes_schema
    ]
    for name, inventory in sorted(tables.items()):
        if name in existing:
            have = table_columns(spark, qualified(catalog, pipeline.namespace, name))
            new = [c for c in inventory.columns if c not in have]
            if new:
                problems.append(f"{name}: messages carry new columns {new}")
    if not problems:
        return
    for event in events:
        event.status = REFUSED
        event.detail = "schema_changes: fail; the batch was stopped before any change"
    raise SchemaChangeRefused(
        f"pipeline {pipeline.name!r}: schema_changes is 'fail' and the batch would change "
        f"table schemas: {'; '.join(problems)}. Nothing was applied; set schema_changes: evolve "
        "(or ignore) to go on"
    )
