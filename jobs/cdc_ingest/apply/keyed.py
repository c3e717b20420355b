"""Applying one batch's changes to one mirrored table by a plan of its own, as row-level
Iceberg changes.

Type the row images, collapse each key's changes to the newest (``collapse``), classify each
against what the table (or a tombstone) already holds (``classify``), then ``MERGE INTO`` the
table and its tombstones (or an append, where the changes only add keys, or only set tombstones
of keys that had none). The MERGE repeats the classification's ordering guard only when another
writer committed to the table since the classification read it (``merge_target``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest.apply.classify import (
    IN_ORDER,
    action_counts,
    classify,
    summed,
    with_in_order,
    with_table_rows,
)
from cdc_ingest.apply.collapse import FIRST_ORDER, newest_changes
from cdc_ingest.apply.commit_notes import (
    PipelineBatch,
    commit_properties,
    counts_properties,
    earlier_counts,
)
from cdc_ingest.apply.concurrent_writes import TOMBSTONE_WRITES
from cdc_ingest.apply.expectations import check_expectations
from cdc_ingest.apply.few_keys import semi_joined
from cdc_ingest.apply.keyed_writes import (
    append_target,
    append_tombstones,
    merge_target,
    merge_tombstones,
)
from cdc_ingest.apply.outcomes import (
    OUTCOMES,
    inserts_only,
    moves_held_tombstones,
    outcome,
    table_summary,
    tombstoned,
    written_rows,
)
from cdc_ingest.apply.soft_deletes import soft_carried
from cdc_ingest.apply.typed_changes import typed_changes, typing_errors
from cdc_ingest.apply.update_images import (
    MOVED_COLUMN,
    with_old_key_deletes,
)
from cdc_ingest.contract import DELETE
from cdc_ingest.schema.target import TargetTable
from cdc_ingest.stages import stage
from cdc_ingest.state.summary import TableSummary
from cdc_ingest.state.tables import (
    TombstoneIndex,
    current_snapshot_facts,
    current_snapshot_id,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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
) -> tuple[TableSummary, DataFrame, MirrorKeys | None]:
    """Apply this table's changes; returns its summary, its dead letters (typing errors) and,
    for a table keeping a history that this run did not create, its classification against the
    rows it held before (``MirrorKeys``).

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
    ``target_table``) and the classification (materialized: it reads what the table held before
    this batch's writes, ``classify``) are only valid until the next batch.
    """
    # Typed inside the collapse's first stage; the typing errors type the rows again, in a pass
    # of their own, only when the counts below say there are some (else an empty plan).
    if target.moves_keys:
        changes = with_old_key_deletes(changes, target)
    typed = typed_changes(changes, target)
    expectations = check_expectations(typed, target)
    # The snapshot the classification reads: the MERGE compares orders again only if it moved.
    read_at, table_rows = (None, 0) if created else current_snapshot_facts(spark, target.identifier)
    newest, ignored = _newest(spark, typed, target, rows, None if created else table_rows)
    index = tombstone_index or TombstoneIndex(spark, target.tombstones)
    with stage("probe tombstones"):
        tombstones = index.holds(target.name)
    tombstone_rows = current_snapshot_facts(spark, target.tombstones)[1] if tombstones else 0
    classified = classify(spark, newest, target, tombstones, tombstone_rows)
    # A history takes its in-order keys from this classification (``history``).
    split = FIRST_ORDER in classified.columns
    if split:
        classified = with_in_order(classified)
    # Materialized by the count below, as rows (a local checkpoint costs less CPU than a columnar
    # cache) and with the lineage cut: the MERGE below changes the table this classification
    # read, and a recomputation after it would classify against the new state. Inside the stage:
    # with adaptive execution, even a lazy checkpoint runs the collapse's shuffle when it is
    # planned, which the stage table would otherwise show as "other".
    with stage("type, collapse, classify"):
        classified = classified.localCheckpoint(eager=False)
        by_order = action_counts(classified, *([IN_ORDER] if split else []))
        counts = summed(by_order)
    moved = 0
    if target.moves_keys:
        moved = typed.where(F.col(MOVED_COLUMN) & F.col("_type_error").isNull()).count()
    summary = table_summary(target.name, counts, rows, ignored, moved)
    summary.expectations = expectations
    earlier = None
    if resumed:
        identifiers = [target.identifier, target.tombstones]
        earlier = earlier_counts(spark, identifiers, batch, target.name, part)
    noted = outcome(summary, created)
    with commit_properties(spark, counts_properties(batch, target.name, part, noted)):
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
                        merged = written_rows(summary, target.deletes == "soft", created=False)
                        merge_target(spark, classified, target, moved_on, merged, table_rows)
        changed = tombstoned(summary, counts)
        if changed:
            held = tombstone_rows if tombstones and moves_held_tombstones(counts) else None
            _write_tombstones(spark, classified, target, batch, changed, held)
            index.add(target.name)
    if earlier is not None:
        for name in (*OUTCOMES, "created"):
            setattr(summary, name, earlier.get(name, getattr(summary, name)))
    errors = typing_errors(typed, target)
    before = None
    if split:
        keys = {flag: sum(k for k, _ in mine.values()) for (flag,), mine in by_order.items()}
        before = MirrorKeys(classified, keys.get(True, 0), keys.get(False, 0))
    return summary, errors if summary.dead_lettered else errors.limit(0), before


@dataclass(frozen=True)
class MirrorKeys:
    """A mirror's classification of a batch's keys against the rows it held before the batch
    (materialized, with ``IN_ORDER``): how many keys had only newer changes, how many not."""

    classified: DataFrame
    in_order: int
    late: int


def _newest(
    spark: SparkSession, typed: DataFrame, target: TargetTable, rows: int, table_rows: int | None
) -> tuple[DataFrame, int]:
    """Each key's newest change of the table's ``rows`` typed changes, with what the table
    holds for it unless this run created the table (``table_rows`` None; else the rows it
    holds); and how many deletes the table ignores (its ``deletes: ignore``)."""
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
    filled = unsent if target.unavailable_values else None
    # Typing errors go to the collapse, which drops them, unless it fills columns from them.
    collapsed = usable if filled else kept
    carry = soft_carried(target)
    if table_rows is None:
        return newest_changes(collapsed, filled, typing_errors=not filled, carry=carry), ignored
    held = with_table_rows(spark, collapsed, target, semi_joined(rows, table_rows))
    per = (*target.keys, "_cdc_key")
    # A history places the keys whose changes are all newer from this classification alone.
    first = target.history is not None and not target.unavailable_values
    newest = newest_changes(
        held, filled, per=per, typing_errors=not filled, carry=carry, first_order=first
    )
    return newest, ignored


def _write_tombstones(
    spark: SparkSession,
    classified: DataFrame,
    target: TargetTable,
    batch: PipelineBatch,
    changed: int,
    held: int | None,
) -> None:
    """The ``changed`` tombstones of the classification: merged where some of its keys had one
    (``held``: the rows ``_cdc_tombstones`` holds, which choose the MERGE's filter), else
    appended."""
    # One commit at a time into the tombstones tables applied at once share (alone_tables).
    with TOMBSTONE_WRITES:
        if held is not None:
            with stage("merge into tombstones"):
                merge_tombstones(spark, classified, target, changes=changed, held=held)
        else:
            with stage("append new tombstones"):
                append_tombstones(classified, target.tombstones, batch, target.name)
