"""Replays and rebuilds: batches that apply already-applied landed files again.

- A **replay** (``replay_from``/``replay_to``, and every Airflow backfill run) re-applies the
  committed files whose landing time (see ``landed_time``) is in ``[from, to)``. It changes rows
  only where a table lacks what those files say: every change keeps the landing position of its
  first application (batch, file index), so a change is never newer than itself and never beats a
  later change with an equal ordering value. It creates no table, executes no DDL (the tables'
  schemas already are what the stream made them; columns they lack are left out, as under
  ``schema_changes: ignore``), re-appends to an append-only table only the rows it no longer holds
  (matched by ``_cdc_order``, which holds the first application's position), writes only dead
  letters not yet recorded for the same file, line and row, and writes no DDL history.
- A **rebuild** (``rebuild_tables``) drops the listed tables (and their tombstones) and applies
  every committed file that is still landed to them, DDL at its stream position included, in one
  batch: the same tables as the original ingestion.

Both are batches of the checkpoint like any other: planned first (the planned rows carry what the
batch is and each file's original position), sealed by a commit whose file rows have status
``replayed``; a run killed in between is resumed as the same replay or rebuild (a rebuild drops
its tables again and starts over).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_ingest.contract import DUPLICATE, UPSERT
from cdc_ingest.landing.landed_time import LandedRange
from cdc_ingest.schema.target import table_keys
from cdc_ingest.state.checkpoints import BatchPlan, CheckpointState, CheckpointStore
from cdc_ingest.state.tables import BATCHES, ORDER_COLUMN, TOMBSTONES, qualified, quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.changes.inventory import Inventory
    from cdc_ingest.config import Config, PipelineConfig
    from cdc_ingest.landing.zones import LandedFile
    from cdc_ingest.run.options import RunOptions
    from cdc_ingest.schema.evolution import DdlEvent
    from cdc_ingest.state.summary import RunSummary

REPLAY, REBUILD = "replay", "rebuild"
NOT_CREATED = "does not exist: a replay creates no table (rebuild_tables re-creates one)"


class ReplayRefused(RuntimeError):
    """A replay or rebuild that cannot be run as asked (one message naming what and why)."""


def mode(plan: BatchPlan) -> str | None:
    """``replay``, ``rebuild`` or None (an ordinary batch)."""
    return None if plan.replay is None else str(plan.replay["mode"])


def rebuilt_tables(plan: BatchPlan) -> tuple[str, ...]:
    """The tables a rebuild batch rebuilds (empty for other batches)."""
    if mode(plan) != REBUILD:
        return ()
    assert plan.replay is not None
    return tuple(plan.replay["tables"])


def pipeline_tables(spark: SparkSession, catalog: str, namespace: str, pipeline: str) -> set[str]:
    """The target tables a pipeline's batches have written (from ``_cdc_batches``)."""
    rows = (
        spark.table(qualified(catalog, namespace, BATCHES))
        .where(F.col("pipeline") == pipeline)
        .select("table_counts")
        .collect()
    )
    return {name for r in rows if r["table_counts"] for name in json.loads(r["table_counts"])}


def _request(landed: LandedRange | None, rebuild: tuple[str, ...]) -> dict[str, Any]:
    """What a replay or rebuild asks for, as its batch header records it."""
    if rebuild:
        return {"mode": REBUILD, "tables": sorted(rebuild)}
    assert landed is not None
    return {"mode": REPLAY, **landed.to_json()}


def plan_batch(
    spark: SparkSession,
    config: Config,
    pipeline_name: str,
    store: CheckpointStore,
    state: CheckpointState,
    listing: list[LandedFile],
    options: RunOptions,
) -> BatchPlan:
    """The batch of a run asking for a replay or rebuild.

    A pending batch that is this same replay or rebuild is resumed; any other pending batch makes
    the request refused (a run without replay options finishes it first).

    Raises:
        ReplayRefused: another batch is pending, or a table to rebuild is not the pipeline's.
    """
    pipeline = config.pipeline(pipeline_name)
    if state.pending_batch_id is not None:
        asked = _request(options.landed, options.rebuild_tables)
        pending = state.pending_replay or {}
        if {k: pending.get(k) for k in asked} != asked:
            raise ReplayRefused(
                f"batch {state.pending_batch_id} was planned and not committed: run without "
                "replay_from/replay_to/rebuild_tables to finish it first"
            )
        return store.plan(listing, state)
    return plan_replay(
        spark,
        pipeline,
        config.catalog.name,
        state,
        listing,
        options.landed,
        options.rebuild_tables,
    )


def plan_replay(
    spark: SparkSession,
    pipeline: PipelineConfig,
    catalog: str,
    state: CheckpointState,
    listing: list[LandedFile],
    landed: LandedRange | None,
    rebuild: tuple[str, ...],
) -> BatchPlan:
    """The replay or rebuild batch: committed files still landed, in their original order.

    Args:
        spark: the session.
        pipeline: the pipeline.
        catalog: the catalog.
        state: the committed checkpoint state (no batch pending).
        listing: the landing zone now.
        landed: the replay's landing-time range (None for a rebuild).
        rebuild: the tables to rebuild (empty for a replay).

    Raises:
        ReplayRefused: a table to rebuild is not one the pipeline writes.
    """
    header = _request(landed, rebuild)
    if rebuild:
        known = pipeline_tables(spark, catalog, pipeline.namespace, pipeline.name)
        unknown = sorted(set(rebuild) - known)
        if unknown:
            raise ReplayRefused(
                f"rebuild_tables {', '.join(unknown)}: not a table of pipeline {pipeline.name} "
                f"(its tables: {', '.join(sorted(known)) or 'none yet'})"
            )
    else:
        header["landed_at"] = pipeline.landed_at.describe()
    selected: list[tuple[tuple[int, int], LandedFile]] = []
    not_applied = 0
    for file in listing:
        if landed is not None and not landed.contains(pipeline.landed_at.landed(file)):
            continue
        first = state.applied.get(file.uri)
        if first is None:
            not_applied += file.uri not in state.seen_files
            continue
        batch_id, file_idx, _, fingerprint = first
        selected.append(((batch_id, file_idx), dataclasses.replace(file, fingerprint=fingerprint)))
    selected.sort(key=lambda item: item[0])
    header["files_not_landed"] = len(set(state.applied) - {f.uri for f in listing})
    header["files_not_applied_yet"] = not_applied
    return BatchPlan(
        state.last_batch_id + 1,
        [f for _, f in selected],
        replay=header,
        origins=[origin for origin, _ in selected],
    )


def with_original_positions(resolved: DataFrame, plan: BatchPlan) -> DataFrame:
    """Each change's landing position as of its file's first application (batch, file index).

    ``_cdc_order`` ends with (batch, file, line, row); the batch and file parts are replaced.
    """
    batches = F.create_map(
        *[x for i, (b, _) in enumerate(plan.origins) for x in (F.lit(i), F.lit(b))]
    )
    indexes = F.create_map(
        *[x for i, (_, j) in enumerate(plan.origins) for x in (F.lit(i), F.lit(j))]
    )
    order = F.col("_cdc_order")
    vendor = F.slice(order, F.lit(1), F.size(order) - 4)
    position = F.array(
        F.element_at(batches, F.col("_cdc_file_idx")).cast("bigint"),
        F.element_at(indexes, F.col("_cdc_file_idx")).cast("bigint"),
        F.element_at(order, -2),
        F.element_at(order, -1),
    )
    return resolved.withColumn("_cdc_order", F.concat(vendor, position))


def without_appended_rows(
    spark: SparkSession, resolved: DataFrame, catalog: str, namespace: str, existing: set[str]
) -> DataFrame:
    """Mark as already applied the row images an append-only table still holds.

    Rows are matched on (table, ``_cdc_order``): the order ends with the row's landing position,
    which is the same in the replay as when the row was first appended.
    """
    held: DataFrame | None = None
    for name in sorted(existing):
        if name.startswith("_cdc_"):
            continue
        identifier = qualified(catalog, namespace, name)
        if table_keys(spark, identifier):
            continue
        rows = spark.table(identifier).select(
            F.lit(name).alias("_held_target"), F.col(ORDER_COLUMN).alias("_held_order")
        )
        held = rows if held is None else held.unionByName(rows)
    if held is None:
        return resolved
    held = held.dropDuplicates()
    joined = resolved.join(
        held,
        (F.col("_cdc_target") == F.col("_held_target"))
        & (F.col("_cdc_order") == F.col("_held_order")),
        "left",
    )
    appended = (
        F.col("_held_target").isNotNull()
        & F.col("_cdc_error").isNull()
        & (F.col("_cdc_kind") == UPSERT)
    )
    return joined.withColumn(
        "_cdc_kind", F.when(appended, F.lit(DUPLICATE)).otherwise(F.col("_cdc_kind"))
    ).drop("_held_target", "_held_order")


def prepare_resolved(
    spark: SparkSession,
    resolved: DataFrame,
    plan: BatchPlan,
    catalog: str,
    namespace: str,
    existing: set[str],
) -> DataFrame:
    """A replay's or rebuild's decoded changes: original positions, appended rows marked."""
    resolved = with_original_positions(resolved, plan)
    if mode(plan) == REPLAY:
        resolved = without_appended_rows(spark, resolved, catalog, namespace, existing)
    return resolved


def replay_config(config: Config, plan: BatchPlan) -> Config:
    """The config a replay applies with: ``schema_changes: ignore`` (a replay evolves nothing)."""
    if mode(plan) != REPLAY:
        return config
    pipelines = tuple(dataclasses.replace(p, schema_changes="ignore") for p in config.pipelines)
    return dataclasses.replace(config, pipelines=pipelines)


def restrict(
    inventory: Inventory, existing: set[str], plan: BatchPlan, summary: RunSummary
) -> None:
    """Leave out the tables a replay must not create; say so in the summary."""
    if mode(plan) != REPLAY:
        return
    for name in sorted(inventory.tables):
        if name not in existing:
            del inventory.tables[name]
            summary.skipped_tables[name] = NOT_CREATED
            summary.skipped_table_messages += inventory.rows.get(name, 0)


def ddl_events(events: list[DdlEvent], plan: BatchPlan) -> list[DdlEvent]:
    """The statements the batch executes: none for a replay, the rebuilt tables' for a rebuild."""
    if mode(plan) == REPLAY:
        return []
    tables = set(rebuilt_tables(plan))
    return [e for e in events if e.target in tables]


def drop_rebuilt(
    spark: SparkSession, catalog: str, namespace: str, plan: BatchPlan, existing: set[str]
) -> None:
    """Drop the tables a rebuild re-creates, and their tombstones (again, when resumed)."""
    tables = rebuilt_tables(plan)
    if not tables:
        return
    for name in tables:
        spark.sql(f"DROP TABLE IF EXISTS {qualified(catalog, namespace, name)}")
        existing.discard(name)
    names = ", ".join("'" + n.replace("'", "''") + "'" for n in tables)
    spark.sql(
        f"DELETE FROM {qualified(catalog, namespace, TOMBSTONES)} "
        f"WHERE {quote('target_table')} IN ({names})"
    )
