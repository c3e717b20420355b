"""DDL records applied to the mirror at their position in the stream.

A table whose batch holds DDL is applied in segments: the changes before the first statement with
the old schema, then the statement, then the changes up to the next one, and so on. A statement is
applied whole or not at all: one the parser cannot read, or one that would narrow a column's type,
changes nothing and is reported (summary, ``_cdc_ddl_history``, task log). The table's
``schema_changes`` policy (``schema_policy``) decides, per kind of change, the rest: before any
change the batch is checked against it (:func:`check_policy`), and a statement's clauses of a
kind it ignores are left out as the statement is planned (:func:`plan_statement`).
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest import schema_policy as kinds
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
from cdc_ingest.schema.routes import Route
from cdc_ingest.schema.target import declared_widenings
from cdc_ingest.schema.types import widens
from cdc_ingest.schema_policy import APPLY, DEAD_LETTER, FAIL, IGNORE, REJECT, SchemaPolicy
from cdc_ingest.sql_text import literal
from cdc_ingest.state.tables import SYSTEM_COLUMNS, qualified, quote, table_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

    from cdc_ingest.config import PipelineConfig
    from cdc_ingest.formats.base import Decoder
    from cdc_ingest.schema.target import TargetInventory

APPLIED, UNCHANGED, REJECTED, IGNORED, REFUSED = (
    "applied",
    "no_change",
    "rejected",
    "ignored",
    "failed",
)
SEGMENT = "_cdc_segment"


class SchemaChangeRefused(RuntimeError):
    """A table's policy is ``fail`` for a kind of change the batch would make."""


class SchemaChangeHeld(RuntimeError):
    """A table's policy is ``dead-letter`` for a kind of change the batch would make: its
    changes of the batch wait in the dead letters."""


@dataclass
class PolicyDecision:
    """What the policies decided before any change: the tables whose changes wait (their
    reasons), and the tables not created (``create_table: ignore``)."""

    held: dict[str, str] = field(default_factory=dict)
    not_created: dict[str, str] = field(default_factory=dict)


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
    # The route that sent its table to ``target``, and the shard it names (db, table): one of
    # the tables a routed mirror takes the rows of (schema/routes).
    route: Route | None = None
    shard: tuple[str, str] | None = None

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
    cached: DataFrame,
    template: str,
    lowercase_names: bool = False,
    by_order: bool = False,
    routes: tuple[Route, ...] = (),
) -> list[DdlEvent]:
    """The batch's DDL records in stream order, parsed.

    The table a statement names decides which mirror it changes (named through the pipeline's
    ``table`` template or ``routes`` with the message's database and schema), not the table the
    message is filed under: a Canal DDL message on ``t`` may carry ``DROP TABLE t2``. A statement
    naming no table stays with the message's table.

    Args:
        cached: the cached batch.
        template: the pipeline's ``table`` template.
        lowercase_names: name columns by their lowercase (``column_names: lowercase``).
        by_order: place statements by their ordering value (``Decoder.statements_apart``).
        routes: the pipeline's routes.
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
        db, schema, message_table = r["_cdc_ddl_scope"] or (None, None, None)
        renamed = [c.new_name for c in parsed.changes if c.action == RENAME_TABLE and c.new_name]
        table = parsed.table if parsed.table is not None else message_table
        named += [(db, schema, table)] + [(db, schema, n) for n in renamed[:1]]
        parsed_rows.append((r, statement, parsed, bool(renamed), (db, schema, table)))
    names = iter(render_targets(cached.sparkSession, template, named, routes))
    events = []
    for r, statement, parsed, renames, source in parsed_rows:
        target, route = next(names)
        if parsed.table is None:
            target = r["_cdc_target"] or ""
        event = DdlEvent(r[0], r[1], r[2], target, statement, parsed)
        if route is not None:
            db, schema, table = source
            event.route, event.shard = routes[route], (db or schema or "", table or "")
        if by_order:
            event.order = bytes(r["_cdc_order"])
        if renames:
            event.renamed_to = next(names)[0]
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


def clause_kinds(change: SchemaChange, columns: dict[str, str]) -> list[str]:
    """The kinds of schema change (``schema_policy``) one clause makes to a table with these
    columns: none for a clause that changes nothing in Iceberg (an ADD COLUMN of a column the
    table has, as every shard of a routed table sends it)."""
    name = change.column or ""
    if (change.action == ADD_COLUMN) == (name in columns) and change.action in (
        ADD_COLUMN,
        DROP_COLUMN,
        RENAME_COLUMN,
    ):
        return []
    found = {
        ADD_COLUMN: [kinds.ADD_COLUMN],
        DROP_COLUMN: [kinds.DROP_COLUMN],
        RENAME_COLUMN: [kinds.RENAME_COLUMN],
        CREATE_TABLE: [kinds.CREATE_TABLE],
        DROP_TABLE: [kinds.DROP_TABLE],
        TRUNCATE_TABLE: [kinds.TRUNCATE],
        RENAME_TABLE: [kinds.RENAME_TABLE],
    }.get(change.action, [])
    if change.action in (MODIFY_COLUMN, RENAME_COLUMN) and change.column_type and name in columns:
        old, new = columns[name], change.column_type.spark_type
        if old != new:
            found.append(kinds.WIDEN_TYPE if widens(old, new) else kinds.NARROW_TYPE)
    return found


def _check(
    change: SchemaChange, columns: dict[str, str], keys: tuple[str, ...], policy: SchemaPolicy
) -> str | None:
    """Why a change cannot be applied to a table with these columns, or None."""
    name = change.column or ""
    if kinds.NARROW_TYPE in clause_kinds(change, columns) and policy[kinds.NARROW_TYPE] == REJECT:
        old, new = columns[name], change.column_type.spark_type if change.column_type else ""
        return f"column '{name}': {old} -> {new} would narrow or change the type"
    if change.action == DROP_COLUMN and name in keys:
        return f"column '{name}' is part of the key"
    if change.action == RENAME_COLUMN and change.new_name in columns and name in columns:
        return f"column '{change.new_name}' exists already"
    return None


def plan_statement(
    spark: SparkSession,
    identifier: str,
    keys: tuple[str, ...],
    event: DdlEvent,
    policy: SchemaPolicy,
) -> tuple[str, str, list[str]]:
    """What one parsed statement does to an existing table, whole or not at all; its clauses
    of a kind ``policy`` ignores are left out.

    Returns:
        (status, detail) for the DDL history, and the SQL statements that do it (none when it is
        rejected or changes nothing).
    """
    parsed = event.parsed
    if parsed.error is not None:
        return REJECTED, parsed.error, []
    columns = {n: t for n, t in table_columns(spark, identifier).items() if n not in SYSTEM_COLUMNS}
    for change in parsed.changes:
        made = clause_kinds(change, columns)
        if made and all(policy[k] in (IGNORE, DEAD_LETTER, FAIL) for k in made):
            continue  # left out below: nothing of it can fail
        problem = _check(change, columns, keys, policy)
        if problem:
            return REJECTED, f"{change.detail}: {problem}; nothing of the statement was applied", []
    done: list[str] = []
    left_out: list[str] = []
    statements: list[str] = []
    for change in parsed.changes:
        name = change.column or ""
        made = clause_kinds(change, columns)
        ignored = [k for k in made if policy[k] != APPLY]
        if ignored:
            clause = f"{change.detail} {name}".strip()
            left_out += [f"{clause} ({policy.says(k)})" for k in ignored]
            if len(ignored) == len(made):
                continue
            # A CHANGE COLUMN that renames and retypes: the part the policy applies.
            if kinds.RENAME_COLUMN in ignored:
                change = dataclasses.replace(change, action=MODIFY_COLUMN, new_name=None)
            else:
                change = dataclasses.replace(change, column_type=None)
        sql, did = _clause_sql(identifier, change, columns, event)
        statements += sql
        done += did
    if left_out:
        done.append("left out: " + ", ".join(left_out))
        if not statements:
            return IGNORED, "; ".join(done), []
    if not done:
        unchanged = ", ".join(c.detail for c in parsed.changes)
        return UNCHANGED, f"nothing to change in Iceberg ({unchanged})", []
    return APPLIED, "; ".join(done), statements


def _clause_sql(
    identifier: str, change: SchemaChange, columns: dict[str, str], event: DdlEvent
) -> tuple[list[str], list[str]]:
    """The SQL statements of one clause the policy applies, and what each did (for the DDL
    history); ``columns`` (name -> Spark SQL type) follows the changes."""
    name = change.column or ""
    statements: list[str] = []
    done: list[str] = []
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
    if change.action in (MODIFY_COLUMN, RENAME_COLUMN) and change.column_type and name in columns:
        new = change.column_type.spark_type
        if columns[name] != new and widens(columns[name], new):
            statements.append(f"ALTER TABLE {identifier} ALTER COLUMN {quote(name)} TYPE {new}")
            done.append(f"widened {name} to {new}")
            columns[name] = new
    elif change.action == TRUNCATE_TABLE and event.route and event.shard:
        # One shard of a routed table: its rows only.
        db_column, table_column = (quote(c) for c in event.route.columns)
        db, table = (literal(n) for n in event.shard)
        statements.append(
            f"DELETE FROM {identifier} WHERE {db_column} = {db} AND {table_column} = {table}"
        )
        done.append(f"removed the rows of {'.'.join(event.shard)}")
    elif change.action == TRUNCATE_TABLE:
        statements.append(f"DELETE FROM {identifier}")
        done.append("removed every row")
    return statements, done


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
    decoder: Decoder,
    existing: set[str],
    tables: dict[str, TargetInventory],
    events: list[DdlEvent],
) -> PolicyDecision:
    """Hold each table's batch to its policy before any change: marks the statements it keeps
    from applying (``ignore``: every clause of a kind it ignores; ``dead-letter``), and returns
    the tables whose changes wait and those not created.

    The kinds are read from the statements and from the messages: columns an existing table
    lacks (``add_column``), wider declared types (``widen_type``), a table the mirror lacks
    (``create_table``). A statement's type change is told a widening or a narrowing by the
    table's columns before the batch.

    Raises:
        SchemaChangeRefused: a kind the batch would make is ``fail`` for its table; nothing has
            been applied.
    """
    decision = PolicyDecision()
    problems: list[str] = []
    by_table: dict[str, list[DdlEvent]] = {}
    for event in events:
        by_table.setdefault(event.target, []).append(event)
    for name in sorted(set(tables) | set(by_table)):
        policy = pipeline.tables.for_table(name).schema_policy
        if not policy.holds_back:
            continue  # every change applies: no catalog load of the table to check it
        columns: dict[str, str] = {}
        if name in existing:
            identifier = qualified(catalog, pipeline.namespace, name)
            columns = {
                n: t for n, t in table_columns(spark, identifier).items() if n not in SYSTEM_COLUMNS
            }
        found: list[tuple[str, str]] = []  # (action, what), in stream order
        for event in by_table.get(name, []):
            statement = repr(" ".join(event.statement.split())[:120])
            if event.parsed.error is not None:
                found.append((policy.for_unreadable, f"{statement}, which cannot be read"))
                continue
            made = [k for c in event.parsed.changes for k in clause_kinds(c, columns)]
            found += [(policy[k], f"{k} {statement}") for k in dict.fromkeys(made)]
            if made and all(policy[k] == IGNORE for k in made):
                event.status = IGNORED
                event.detail = "; ".join(policy.says(k) for k in dict.fromkeys(made))
        inventory = tables.get(name)
        if inventory is not None and name not in existing:
            found.append((policy[kinds.CREATE_TABLE], "create_table: messages for a new table"))
            if policy[kinds.CREATE_TABLE] == IGNORE:
                decision.not_created[name] = f"not created ({policy.says(kinds.CREATE_TABLE)})"
        elif inventory is not None:
            new = [c for c in inventory.columns if c not in columns]
            if new:
                found.append((policy[kinds.ADD_COLUMN], f"add_column: messages carry {new}"))
            wider = declared_widenings(decoder, inventory, columns)
            if wider:
                found.append((policy[kinds.WIDEN_TYPE], f"widen_type: messages declare {wider}"))
        for action, what in found:
            if action == FAIL:
                problems.append(f"{name}: {what}")
            elif action == DEAD_LETTER:
                decision.held.setdefault(name, f"waits: schema_changes is dead-letter for {what}")
    if problems:
        for event in events:
            event.status = REFUSED
            event.detail = "schema_changes: fail; the batch was stopped before any change"
        raise SchemaChangeRefused(
            f"pipeline {pipeline.name!r}: schema_changes is 'fail' for a change the batch would "
            f"make: {'; '.join(problems)}. Nothing was applied; set that kind to apply (or "
            "ignore) to go on"
        )
    for name, reason in decision.held.items():
        for event in by_table.get(name, []):
            event.status = REFUSED
            event.detail = f"{reason}; the table's changes of the batch are dead letters"
    return decision
