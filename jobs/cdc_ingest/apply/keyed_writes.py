"""Writing a classified batch of a keyed table: ``MERGE INTO`` the mirror (or an append to a
table this batch created) and the table's keys in the namespace's ``_cdc_tombstones``.

Each write reads the classification's ``_action`` (``actions``) and the newest change per key.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest import sql_text
from cdc_ingest.apply.actions import DELETED, DELETED_ABSENT, DELETED_WRITTEN, INSERT, UPDATE
from cdc_ingest.apply.few_keys import listed_keys
from cdc_ingest.apply.runtime_filter import bloom_filtered, unestimated, worth_filtering
from cdc_ingest.apply.update_images import KEEP_COLUMN
from cdc_ingest.catalog_commits import append, execute
from cdc_ingest.schema.target import TargetTable
from cdc_ingest.state.tables import ORDER_COLUMN, current_snapshot_facts, quote
from cdc_ingest.table_options import DELETED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.apply.commit_notes import PipelineBatch

_views = itertools.count()
# With soft deletes, the actions that write a change's whole row (flagged where it deletes).
WRITTEN_ROWS = (INSERT, UPDATE, DELETED_WRITTEN)


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def merge_target(
    spark: SparkSession,
    classified: DataFrame,
    target: TargetTable,
    guarded: bool,
    merged: int = 0,
    table_rows: int = 0,
) -> None:
    """``MERGE INTO`` the mirror the changes its classification marked.

    The classification already compared each change's order with the row's (``OLDER`` changes
    are not merged). ``guarded`` repeats that comparison inside the MERGE, for a table another
    writer committed to since the classification read it: the comparison reads the table's
    ``_cdc_order`` on every row, cheaply as ``binary``, which Iceberg reads vectorized (a list
    it does not). ``merged`` changes (the count of
    the classification's merged actions) into ``table_rows`` rows may list their keys in the
    condition (``few_keys.listed_keys``); where they are too many for that but the table is still
    much larger, a bloom filter of their keys keeps its other rows out of the join
    (``runtime_filter``).
    """
    columns = [*target.written_columns, ORDER_COLUMN, "_cdc_op", "_cdc_batch_id"]
    soft = target.deletes == "soft"
    view = f"_cdc_merge_{next(_views)}"
    carried = [KEEP_COLUMN] if KEEP_COLUMN in classified.columns else []
    # With soft deletes, a delete of a soft-deleted row still moves its order on.
    actions = (*WRITTEN_ROWS, DELETED, DELETED_ABSENT) if soft else (INSERT, UPDATE, DELETED)

    def merged_rows(frame: DataFrame) -> DataFrame:
        selected = sql_text.columns([*columns, "_action", *carried])
        return frame.where(F.col("_action").isin(*actions)).select(*selected)

    source = merged_rows(classified)
    listed = listed_keys(source, target, merged, table_rows)
    filtered = not listed and worth_filtering(merged, table_rows)
    if filtered:
        source = merged_rows(unestimated(classified))
    source.createOrReplaceTempView(view)
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in target.keys) + listed
    newer = f" AND s.{ORDER_COLUMN} > t.{ORDER_COLUMN}" if guarded else ""
    keeps = KEEP_COLUMN in classified.columns
    sets = ", ".join(
        f"{quote(c)} = CASE WHEN array_contains(s.{KEEP_COLUMN}, {_literal(c)}) "
        f"THEN t.{quote(c)} "
        f"ELSE s.{quote(c)} END"
        if keeps and c in target.columns and c not in target.keys
        else f"{quote(c)} = s.{quote(c)}"
        for c in columns
    )
    names = ", ".join(quote(c) for c in columns)
    values = ", ".join(f"s.{quote(c)}" for c in columns)
    if soft:
        flag = quote(DELETED_COLUMN)
        marks = ", ".join(f"{c} = s.{c}" for c in (ORDER_COLUMN, "_cdc_op", "_cdc_batch_id"))
        written = ", ".join(f"'{action}'" for action in WRITTEN_ROWS)
        flagged = f"s._action = '{DELETED_WRITTEN}'"
        statement = (
            f"MERGE INTO {target.identifier} t USING {view} s ON {on} "
            f"WHEN MATCHED AND s._action IN ('{DELETED}', '{DELETED_ABSENT}'){newer} "
            f"THEN UPDATE SET {flag} = true, {marks} "
            f"WHEN MATCHED AND s._action IN ({written}){newer} "
            f"THEN UPDATE SET {sets}, {flag} = {flagged} "
            f"WHEN NOT MATCHED AND s._action IN ('{INSERT}', '{DELETED_WRITTEN}') "
            f"THEN INSERT ({names}, {flag}) VALUES ({values}, {flagged})"
        )
    else:
        statement = (
            f"MERGE INTO {target.identifier} t USING {view} s ON {on} "
            f"WHEN MATCHED AND s._action = '{DELETED}'{newer} THEN DELETE "
            f"WHEN MATCHED AND s._action = '{UPDATE}'{newer} THEN UPDATE SET {sets} "
            f"WHEN NOT MATCHED AND s._action = '{INSERT}' THEN INSERT ({names}) VALUES ({values})"
        )
    with bloom_filtered(spark, merged) if filtered else contextlib.nullcontext():
        execute(spark, statement)
    spark.catalog.dropTempView(view)


def append_target(classified: DataFrame, target: TargetTable, batch: PipelineBatch) -> None:
    """Insert into a table this run created (or one whose changes only add keys): nothing to
    match, so no MERGE join or delete files. With soft deletes, a delete that writes its upsert's
    row adds it flagged."""
    columns: list[Column | str] = [
        *sql_text.columns(target.written_columns),
        ORDER_COLUMN,
        "_cdc_op",
        "_cdc_batch_id",
    ]
    action = F.col("_action")
    if target.deletes == "soft":
        columns.append((action == DELETED_WRITTEN).alias(DELETED_COLUMN))
    added = action.isin(INSERT, DELETED_WRITTEN)
    _append(classified.where(added).select(*columns), target.identifier, batch)


def _tombstone_changes(classified: DataFrame, table: Column) -> DataFrame:
    """The tombstones a classification sets or clears; ``table`` names each change's table."""
    action = F.col("_action")
    return classified.where(
        action.isin(DELETED, DELETED_ABSENT, DELETED_WRITTEN)
        | ((action == INSERT) & F.col("_had_tombstone"))
    ).select(
        table.alias("target_table"),
        F.col("_cdc_key").alias("key"),
        F.col(ORDER_COLUMN),
        F.col("_cdc_batch_id").alias("batch_id"),
        F.when(action == INSERT, F.lit("clear")).otherwise(F.lit("set")).alias("_tomb"),
    )


def merge_tombstones(
    spark: SparkSession,
    classified: DataFrame,
    target: TargetTable,
    table: Column | None = None,
    changes: int = 0,
    held: int | None = None,
) -> None:
    """Set, move or clear the tombstones of the classified keys (``table``: the column naming
    each change's table when ``classified`` holds several; else ``target``'s name). ``changes``:
    how many tombstones the classification sets or clears; where the namespace holds (``held``,
    read from the catalog when not given) at least ``runtime_filter.LARGER`` times as many, a
    bloom filter of their keys keeps the others out of the MERGE's join (the tombstones of every
    delete ever applied stay in the table)."""
    view = f"_cdc_tombstones_{next(_views)}"
    named = F.lit(target.name) if table is None else table
    if held is None:
        held = current_snapshot_facts(spark, target.tombstones)[1] if changes else 0
    filtered = worth_filtering(changes, held)
    rows = unestimated(classified) if filtered else classified
    _tombstone_changes(rows, named).createOrReplaceTempView(view)
    statement = (
        f"MERGE INTO {target.tombstones} t USING {view} s "
        "ON t.target_table = s.target_table AND t.key = s.key "
        "WHEN MATCHED AND s._tomb = 'clear' THEN DELETE "
        f"WHEN MATCHED AND s._tomb = 'set' AND s.{ORDER_COLUMN} > t.{ORDER_COLUMN} THEN UPDATE SET "
        f"{ORDER_COLUMN} = s.{ORDER_COLUMN}, batch_id = s.batch_id "
        "WHEN NOT MATCHED AND s._tomb = 'set' THEN INSERT "
        f"(target_table, key, {ORDER_COLUMN}, batch_id) VALUES "
        f"(s.target_table, s.key, s.{ORDER_COLUMN}, s.batch_id)"
    )
    with bloom_filtered(spark, changes) if filtered else contextlib.nullcontext():
        execute(spark, statement)
    spark.catalog.dropTempView(view)


def append_tombstones(
    classified: DataFrame, tombstones: str, batch: PipelineBatch, table: Column | str
) -> None:
    """Add tombstones for tables that had none: every one is new (none to clear or move).

    ``table``: the table's name, or the column naming each change's table (several tables).
    """
    name = F.lit(table) if isinstance(table, str) else table
    rows = _tombstone_changes(classified, name).drop("_tomb")
    _append(rows, tombstones, batch)


def _append(rows: DataFrame, identifier: str, batch: PipelineBatch) -> None:
    marks = {f"snapshot-property.{k}": v for k, v in batch.properties().items()}
    append(rows.writeTo(identifier).options(**marks))
