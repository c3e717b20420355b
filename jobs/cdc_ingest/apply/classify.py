"""The classification: each key's newest change marked with what applying it does to its table
(``_action``: insert, update, delete, a delete of an absent key, older than what the table or a
tombstone holds), and the counts of those marks. The ordering guard: a change not newer than
what the table holds is never written, so re-applying a batch changes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest import sql_text
from cdc_ingest.apply.actions import (
    DELETED,
    DELETED_ABSENT,
    DELETED_WRITTEN,
    INSERT,
    OLDER,
    UPDATE,
)
from cdc_ingest.apply.collapse import FIRST_ORDER
from cdc_ingest.apply.few_keys import rows_of_keys
from cdc_ingest.apply.soft_deletes import CARRIED_ORDER, carries_values
from cdc_ingest.contract import DELETE, UPSERT
from cdc_ingest.sql_text import literal
from cdc_ingest.state.tables import ORDER_COLUMN
from cdc_ingest.table_options import DELETED_COLUMN

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.schema.target import TargetTable

# A namespace's tombstones (every table's) are broadcast to a table's changes up to this many
# rows: about 60 MB of key texts and orders, against a shuffle of every change with its images.
BROADCAST_TOMBSTONES = 500_000


def with_table_rows(
    spark: SparkSession, changes: DataFrame, target: TargetTable, few: bool = False
) -> DataFrame:
    """``changes`` (typed, not yet collapsed) with what the table holds for each one's key:
    ``_t_order`` (and ``_t_deleted`` for soft deletes), null where it holds no row.

    Joined before the collapse, so that the collapse (``newest_changes`` per the key's columns
    and ``_cdc_key``) finds the changes partitioned by the join and needs no shuffle of its own,
    and so that where ``few`` (``few_keys.semi_joined``) the table's rows are kept to the
    changes' keys by a broadcast of those keys (typed alone) without computing the collapse twice.
    """
    soft = target.deletes == "soft"
    current = sql_text.select(
        spark.table(target.identifier),
        [
            *[f"{sql_text.name(k)} AS {sql_text.name('_t_' + k)}" for k in target.keys],
            f"{ORDER_COLUMN} AS _t_order",
            *([f"{DELETED_COLUMN} AS _t_deleted"] if soft else []),
        ],
    )
    if few:
        current = rows_of_keys(current, changes, target.keys)
    on_key = " AND ".join(f"{sql_text.name(k)} = {sql_text.name('_t_' + k)}" for k in target.keys)
    return changes.join(current, F.expr(on_key), "left")


def classify(
    spark: SparkSession,
    newest: DataFrame,
    target: TargetTable,
    tombstones: bool,
    tombstone_rows: int = 0,
) -> DataFrame:
    """Each key's newest change marked with what applying it does (``_action``).

    Args:
        spark: the session.
        newest: output of ``newest_changes``, over ``with_table_rows`` where the table may hold
            rows (a table this run created holds none).
        target: the table.
        tombstones: whether ``_cdc_tombstones`` may hold keys of this table.
        tombstone_rows: how many rows ``_cdc_tombstones`` holds (every table's); up to
            ``BROADCAST_TOMBSTONES``, this table's are broadcast to the changes, which then need
            no shuffle by their key's text of their own (they are partitioned by the key's
            columns, ``with_table_rows``).
    """
    joined = newest
    soft = target.deletes == "soft"
    if "_t_order" not in joined.columns:
        joined = sql_text.select(joined, ["*", "CAST(NULL AS BINARY) AS _t_order"])
    if soft and "_t_deleted" not in joined.columns:
        joined = sql_text.select(joined, ["*", "CAST(NULL AS BOOLEAN) AS _t_deleted"])
    if tombstones:
        deleted = sql_text.select(
            spark.table(target.tombstones).where(f"target_table = {literal(target.name)}"),
            ["key AS _d_key", f"{ORDER_COLUMN} AS _d_order"],
        )
        if 0 < tombstone_rows <= BROADCAST_TOMBSTONES:
            deleted = F.broadcast(deleted)
        joined = joined.join(deleted, F.expr("_cdc_key = _d_key"), "left")
    else:
        joined = sql_text.select(joined, ["*", "CAST(NULL AS BINARY) AS _d_order"])
    return with_actions(joined, soft)


def with_actions(joined: DataFrame, soft: bool = False) -> DataFrame:
    """``_action`` and ``_had_tombstone`` of each newest change joined with what its table holds
    for the key (``_t_order``, and ``_t_deleted`` when ``soft``) and its tombstone (``_d_order``),
    each null where there is none."""
    exists = "_t_order IS NOT NULL"
    newer = f"({exists} AND {ORDER_COLUMN} > _t_order)"
    # A soft-deleted row is there but not live: a newer insert revives it (an insert), a newer
    # delete only moves its order on (a delete of an absent key).
    gone = f"({newer} AND coalesce(_t_deleted, false))" if soft else "false"
    is_delete = f"_cdc_kind = {literal(DELETE)}"
    deleted, deleted_absent = literal(DELETED), literal(DELETED_ABSENT)
    if soft and CARRIED_ORDER in joined.columns:
        # A delete that carries the values of an upsert the table has not seen writes them.
        written = f"WHEN {carries_values()} THEN {literal(DELETED_WRITTEN)}"
        deleted = f"CASE {written} ELSE {deleted} END"
        deleted_absent = f"CASE {written} ELSE {deleted_absent} END"
    action = (
        f"CASE WHEN {gone} THEN"
        f" CASE WHEN {is_delete} THEN {deleted_absent} ELSE {literal(INSERT)} END"
        f" WHEN {newer} THEN"
        f" CASE WHEN {is_delete} THEN {deleted} ELSE {literal(UPDATE)} END"
        f" WHEN {exists} THEN {literal(OLDER)}"
        f" WHEN _d_order IS NOT NULL AND {ORDER_COLUMN} <= _d_order THEN {literal(OLDER)}"
        f" WHEN _cdc_kind = {literal(UPSERT)} THEN {literal(INSERT)}"
        f" ELSE {deleted_absent} END"
    )
    return sql_text.select(
        joined, ["*", f"{action} AS _action", "_d_order IS NOT NULL AS _had_tombstone"]
    )


# Whether every change of a key in the batch is newer than what its table (or its tombstone)
# held: only with the key's oldest change (``collapse.FIRST_ORDER``); a key neither held is new.
IN_ORDER = "_cdc_in_order"


def with_in_order(classified: DataFrame) -> DataFrame:
    """``classified`` (collapsed with ``first_order``) with ``IN_ORDER``."""
    held = "greatest(_t_order, _d_order)"
    return sql_text.select(
        classified, ["*", f"({held} IS NULL OR {FIRST_ORDER} > {held}) AS {IN_ORDER}"]
    )


# Keys and changes per classification: (action, had a tombstone) -> (keys, changes).
ActionCounts = dict[tuple[str, bool], tuple[int, int]]


def summed(counts: dict[tuple[object, ...], ActionCounts]) -> ActionCounts:
    """The counts of every value of ``action_counts``' ``by`` added up."""
    total: ActionCounts = {}
    for mine in counts.values():
        for mark, (keys, changes) in mine.items():
            held_keys, held_changes = total.get(mark, (0, 0))
            total[mark] = (held_keys + keys, held_changes + changes)
    return total


def action_counts(classified: DataFrame, *by: str) -> dict[tuple[object, ...], ActionCounts]:
    """How many keys, and changes, each classification has; one job, per value of ``by``."""
    counts: dict[tuple[object, ...], ActionCounts] = {}
    rows = sql_text.aggregate(
        classified,
        [*(sql_text.name(column) for column in by), "_action", "_had_tombstone"],
        ["count(1) AS keys", "sum(_changes) AS changes"],
    ).collect()
    for r in rows:
        mine = counts.setdefault(tuple(r[b] for b in by), {})
        mine[(r["_action"], r["_had_tombstone"])] = (r["keys"], r["changes"])
    if not by:
        counts.setdefault((), {})
    return counts


def arrow_action_counts(classified: pa.Table, by: str) -> dict[tuple[object, ...], ActionCounts]:
    """``action_counts`` of a classification collected as Arrow (per value of the column ``by``)."""
    counted = classified.group_by([by, "_action", "_had_tombstone"]).aggregate(
        [([], "count_all"), ("_changes", "sum")]
    )
    counts: dict[tuple[object, ...], ActionCounts] = {}
    for r in counted.to_pylist():
        mine = counts.setdefault((r[by],), {})
        mine[(r["_action"], r["_had_tombstone"])] = (r["count_all"], r["_changes_sum"])
    return counts
