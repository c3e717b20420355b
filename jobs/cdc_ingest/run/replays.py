"""The mechanics of replays and rebuilds: their plan and their changes' original positions.

What a replay and a rebuild are, and what they write, is in :mod:`cdc_ingest.run.modes`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_ingest import ordering
from cdc_ingest.contract import DUPLICATE, UPSERT
from cdc_ingest.landing.landed_time import LandedRange
from cdc_ingest.record.batches import written_tables
from cdc_ingest.schema.target import table_keys
from cdc_ingest.state.checkpoints import BatchPlan
from cdc_ingest.state.lake import CheckpointState
from cdc_ingest.state.order_migration import LEGACY_TYPE
from cdc_ingest.state.tables import BATCHES, ORDER_COLUMN, qualified

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.config import PipelineConfig
    from cdc_ingest.landing.zones import LandedFile

REPLAY, REBUILD = "replay", "rebuild"
NOT_CREATED = "does not exist: a replay creates no table (rebuild_tables re-creates one)"


class ReplayRefused(RuntimeError):
    """A replay or rebuild that cannot be run as asked (one message naming what and why)."""


def pipeline_tables(spark: SparkSession, catalog: str, namespace: str, pipeline: str) -> set[str]:
    """The target tables a pipeline's batches have written (from ``_cdc_batches``)."""
    identifier = qualified(catalog, namespace, BATCHES)
    return written_tables(spark, identifier, pipeline).get(pipeline, set())


def replay_request(landed: LandedRange | None, rebuild: tuple[str, ...]) -> dict[str, Any]:
    """What a replay or rebuild asks for, as its batch header records it."""
    if rebuild:
        return {"mode": REBUILD, "tables": sorted(rebuild)}
    assert landed is not None
    return {"mode": REPLAY, **landed.to_json()}


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
    header = replay_request(landed, rebuild)
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

    def by_file(values: list[int]) -> str:
        pairs = ", ".join(f"{i}, CAST({v} AS BIGINT)" for i, v in enumerate(values))
        if not pairs:
            return "CAST(NULL AS BIGINT)"
        return f"element_at(map({pairs}), _cdc_file_idx)"

    batches = by_file([b for b, _ in plan.origins])
    indexes = by_file([j for _, j in plan.origins])
    order = "_cdc_order"
    replaced = (
        f"concat({ordering.without_last_sql(order, 4)}, {ordering.element_sql(batches)},"
        f" {ordering.element_sql(indexes)}, {ordering.elements_sql(order, -2)})"
    )
    return resolved.withColumn("_cdc_order", F.expr(replaced))


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
        table = spark.table(identifier)
        order = F.col(ORDER_COLUMN)
        if dict(table.dtypes).get(ORDER_COLUMN) == LEGACY_TYPE:  # migrated when next applied
            order = F.expr(ordering.encoded_sql(ORDER_COLUMN))
        rows = table.select(F.lit(name).alias("_held_target"), order.alias("_held_order"))
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
