"""Applying one batch's changes to one mirrored table, as row-level Iceberg changes.

Per table: type the row images, collapse each key's changes to the newest, classify each against
what the table (or a tombstone) already holds, then ``MERGE INTO`` the table and its tombstones
(or an append, where the changes only add keys, or only set tombstones of keys that had none).
The classification is the ordering guard: a change not newer than what the table holds is not
merged, so re-applying a batch changes nothing. The MERGE repeats the guard only when another
writer committed to the table since the classification read it (``merge_target``).
"""

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
from cdc_ingest.apply.collapse import newest_changes
from cdc_ingest.apply.commit_notes import (
    PipelineBatch,
    commit_properties,
    counts_properties,
    earlier_counts,
)
from cdc_ingest.apply.concurrent_writes import TOMBSTONE_WRITES
from cdc_ingest.apply.expectations import check_expectations
from cdc_ingest.apply.few_keys import rows_of_keys, semi_joined
from cdc_ingest.apply.keyed_writes import (
    append_target,
    append_tombstones,
    merge_target,
    merge_tombstones,
)
from cdc_ingest.apply.soft_deletes import CARRIED_ORDER, carries_values, soft_carried
from cdc_ingest.apply.typed_changes import typed_changes, typing_errors
from cdc_ingest.apply.update_images import (
    MOVED_COLUMN,
    with_old_key_deletes,
)
from cdc_ingest.contract import DELETE, UPSERT
from cdc_ingest.schema.target import TargetTable
from cdc_ingest.sql_text import literal
from cdc_ingest.stages import stage
from cdc_ingest.state.summary import TableSummary
from cdc_ingest.state.tables import (
    ORDER_COLUMN,
    TombstoneIndex,
    current_snapshot_facts,
    current_snapshot_id,
)
from cdc_ingest.table_options import DELETED_COLUMN

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

# A namespace's tombstones (every table's) are broadcast to a table's changes up to this many
# rows: about 60 MB of key texts and orders, against a shuffle of every change with its images.
BROADCAST_TOMBSTONES = 500_000
# What a table's summary says about its changes (dead letters come from the batch, not the table).
OUTCOMES = (
    "messages",
    "inserted",
    "updated",
    "deleted",
    "deleted_absent",
    "superseded",
    "older",
    "key_changes",
    "deletes_ignored",
)


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


# Keys and changes per classification: (action, had a tombstone) -> (keys, changes).
ActionCounts = dict[tuple[str, bool], tuple[int, int]]


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


def moves_held_tombstones(counts: ActionCounts) -> bool:
    """Whether a key the classification tombstones (a delete sets one, an insert clears one) had
    one already. Where none had, the MERGE into ``_cdc_tombstones`` would only insert, so the
    tombstones are appended instead, without its join of every tombstone the namespace holds:
    the common case of a stream, whose deletes are of keys deleted for the first time. A writer
    that set one of those keys' tombstones since the classification read them is the same race
    as for the first tombstones of a table, which are appended too."""
    tombstoning = (DELETED, DELETED_ABSENT, DELETED_WRITTEN, INSERT)
    return any(had and act in tombstoning and keys for (act, had), (keys, _) in counts.items())


def inserts_only(summary: TableSummary, target: TargetTable, moved_on: bool) -> bool:
    """Whether a table's classified changes only insert keys it does not hold, so that they are
    appended: the MERGE would join them with the table's rows to insert every one of them (a
    stream of new rows, an insert-only table, costs one append per batch, not a join of the
    table). Not where another writer committed to the table since the classification read it
    (the MERGE then compares orders again), nor with soft deletes, where an insert may revive a
    soft-deleted row. A writer that inserts one of those keys between this check and the
    append's commit is the race a table this run created has too, which is appended as well."""
    writes_held = summary.updated or summary.deleted or target.deletes == "soft"
    return bool(summary.inserted) and not writes_held and not moved_on


def table_summary(
    name: str, counts: ActionCounts, rows: int, ignored: int = 0, moved: int = 0
) -> TableSummary:
    """A table's outcomes from its classification's counts; the rest of its ``rows`` (the
    changes aimed at it) are dead letters."""
    by_action: dict[str, int] = {}
    for (act, _), (keys, _) in counts.items():
        by_action[act] = by_action.get(act, 0) + keys
    good = sum(n for _, n in counts.values())
    return TableSummary(
        table=name,
        messages=good + ignored - moved,
        key_changes=moved,
        deletes_ignored=ignored,
        inserted=by_action.get(INSERT, 0),
        updated=by_action.get(UPDATE, 0),
        deleted=by_action.get(DELETED, 0) + by_action.get(DELETED_WRITTEN, 0),
        deleted_absent=by_action.get(DELETED_ABSENT, 0),
        superseded=good - sum(by_action.values()),
        older=by_action.get(OLDER, 0),
        dead_lettered=rows - (good + ignored - moved),
    )


def apply_table(
    spark: SparkSession,
    changes: DataFrame,
    target: TargetTable,
    batch: PipelineBatch,
    rows: int,
    created: bool,
    part: str = "0",
    resumed: bool = False,
    tombstone_index: TombstoneIndex | None = None,
) -> tuple[TableSummary, DataFrame]:
    """Apply this table's changes; returns its summary and its dead letters (typing errors).

    Each commit carries the table's counts (``commit_notes``): a resumed batch reports the counts
    of the attempt that changed the table, not its own (which finds those changes applied).

    Args:
        spark, target, batch: the session, the table, the batch.
        changes: the batch's changes (cached), every table's.
        rows: how many of ``changes`` are aimed at this table (the batch inventory counted them),
            so that typing errors cost a pass of their own only when there are some.
        created: whether this run created the table (``prepare_target`` creates it with a plain
            CREATE, so only one writer can), which then holds no rows to compare with.
        part: which part of the batch's changes to the table (segments around DDL statements);
            ``resumed``: whether the batch was started by an earlier run.
        tombstone_index: the batch's index of tables with tombstones (default: probe them).

    The dead-letter frame (``_cdc_file_idx``, ``_cdc_line``, ``reason``, ``source_table``,
    ``target_table``) is only valid until the next batch.
    """
    # Typed inside the collapse's first stage; the typing errors type the rows again, in a pass
    # of their own, only when the counts below say there are some (else an empty plan).
    if target.moves_keys:
        changes = with_old_key_deletes(changes, target)
    typed = typed_changes(changes, target)
    expectations = check_expectations(typed, target)
    unsent = [c for c in target.columns if c not in target.keys]
    usable = typed.where(F.col("_type_error").isNull())
    kept = typed
    ignored = 0
    if target.deletes == "ignore":
        # Skipped before the collapse: an ignored delete supersedes nothing.
        is_delete = F.col("_cdc_kind") == DELETE
        with stage("count ignored deletes"):
            ignored = usable.where(is_delete).count()
        usable, kept = usable.where(~is_delete), typed.where(~is_delete)
    # The snapshot the classification reads: the MERGE compares orders again only if it moved.
    read_at, table_rows = (None, 0) if created else current_snapshot_facts(spark, target.identifier)
    filled = unsent if target.unavailable_values else None
    # Typing errors go to the collapse, which drops them, unless it fills columns from them.
    collapsed = usable if filled else kept
    carry = soft_carried(target)
    if created:
        newest = newest_changes(collapsed, filled, typing_errors=not filled, carry=carry)
    else:
        held = with_table_rows(spark, collapsed, target, semi_joined(rows, table_rows))
        per = (*target.keys, "_cdc_key")
        newest = newest_changes(held, filled, per=per, typing_errors=not filled, carry=carry)
    index = tombstone_index or TombstoneIndex(spark, target.tombstones)
    with stage("probe tombstones"):
        tombstones = index.holds(target.name)
    tombstone_rows = current_snapshot_facts(spark, target.tombstones)[1] if tombstones else 0
    classified = classify(spark, newest, target, tombstones, tombstone_rows)
    # Materialized by the count below, as rows (a local checkpoint costs less CPU than a columnar
    # cache) and with the lineage cut: the MERGE below changes the table this classification
    # read, and a recomputation after it would classify against the new state. Inside the stage:
    # with adaptive execution, even a lazy checkpoint runs the collapse's shuffle when it is
    # planned, which the stage table would otherwise show as "other".
    with stage("type, collapse, classify"):
        classified = classified.localCheckpoint(eager=False)
        counts = action_counts(classified)[()]
    moved = 0
    if target.moves_keys:
        moved = typed.where(F.col(MOVED_COLUMN) & F.col("_type_error").isNull()).count()
    summary = table_summary(target.name, counts, rows, ignored, moved)
    summary.expectations = expectations
    earlier = None
    if resumed:
        identifiers = [target.identifier, target.tombstones]
        earlier = earlier_counts(spark, identifiers, batch, target.name, part)
    outcome = {f: getattr(summary, f) for f in OUTCOMES} | {"created": created}
    with commit_properties(spark, counts_properties(batch, target.name, part, outcome)):
        # A soft-deleted row's order moves on with every newer delete of its key.
        moves_soft = target.deletes == "soft" and summary.deleted_absent and not created
        if summary.inserted or summary.updated or summary.deleted or moves_soft:
            if created:
                with stage("append to created table"):
                    append_target(classified, target, batch)
            else:
                moved_on = current_snapshot_id(spark, target.identifier) != read_at
                if inserts_only(summary, target, moved_on):
                    with stage("append to table"):
                        append_target(classified, target, batch)
                else:
                    with stage("merge into table"):
                        merged = summary.inserted + summary.updated + summary.deleted
                        merged += summary.deleted_absent if target.deletes == "soft" else 0
                        merge_target(spark, classified, target, moved_on, merged, table_rows)
        tombstoned = summary.deleted + summary.deleted_absent
        tombstoned += counts.get((INSERT, True), (0, 0))[0]
        if tombstoned:
            # One commit at a time into the tombstones tables applied at once share (alone_tables).
            with TOMBSTONE_WRITES:
                if tombstones and moves_held_tombstones(counts):
                    with stage("merge into tombstones"):
                        # Counted before the classification: the count only chooses the filter.
                        merge_tombstones(
                            spark, classified, target, changes=tombstoned, held=tombstone_rows
                        )
                else:
                    with stage("append new tombstones"):
                        append_tombstones(classified, target.tombstones, batch, target.name)
            index.add(target.name)
    if earlier is not None:
        for name in (*OUTCOMES, "created"):
            setattr(summary, name, earlier.get(name, getattr(summary, name)))
    errors = typing_errors(typed, target)
    return summary, errors if summary.dead_lettered else errors.limit(0)
