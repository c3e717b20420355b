"""One micro-batch of one pipeline: plan, read, decode, apply, dead-letter, checkpoint."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import functions as F

from cdc_ingest.apply import apply_table
from cdc_ingest.changes import DUPLICATE, mark_applied_offsets, resolve_changes
from cdc_ingest.checkpoint_store import CheckpointStore
from cdc_ingest.ddl_history import record_ddl
from cdc_ingest.formats import load_decoder
from cdc_ingest.formats.base import DDL, DELETE, NOOP, UPSERT
from cdc_ingest.landing import list_landed
from cdc_ingest.reader import read_lines, to_records
from cdc_ingest.spark_session import configure_catalog
from cdc_ingest.summary import RunSummary
from cdc_ingest.tables import DEAD_LETTERS, ensure_system_tables, qualified, table_names
from cdc_ingest.target_schema import TargetInventory, prepare_target

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.config import Config

DEAD_LETTER_SAMPLES = 20
# Fault injection for the crash-safety tests: the named step exits the process abruptly.
FAIL_AT_ENV = "CDC_INGEST_FAIL_AT"


def _maybe_die(step: str) -> None:
    if os.environ.get(FAIL_AT_ENV) == step:
        os._exit(99)


def run_pipeline(spark: SparkSession, config: Config, pipeline_name: str) -> RunSummary:
    """Apply every landed file of a pipeline not applied yet, as one micro-batch.

    Raises:
        ConfigError: unknown pipeline.
        LandingError: the landing zone cannot be listed or a file cannot be read.
    """
    pipeline = config.pipeline(pipeline_name)
    decoder = load_decoder(pipeline.format)
    catalog, namespace = config.catalog.name, pipeline.namespace
    listing = list_landed(pipeline.landing)
    configure_catalog(spark, config.catalog)
    ensure_system_tables(spark, catalog, namespace)
    store = CheckpointStore(spark, catalog, namespace, pipeline.name)
    state = store.load()
    plan = store.plan(listing, state)
    summary = RunSummary(pipeline=pipeline.name)
    if plan.empty:
        return summary
    summary.batch_id, summary.resumed = plan.batch_id, plan.resumed
    summary.files = [f.uri for f in plan.files]
    summary.duplicate_files = dict(plan.duplicates)
    if not plan.resumed and plan.files:
        store.record_planned(plan)
    _maybe_die("after_plan")

    offsets: list[tuple[int, str, int, int, int, int]] = []
    records_per_file: dict[int, int] = {}
    if plan.files:
        records = to_records(read_lines(spark, summary.files), pipeline.envelope)
        if pipeline.envelope == "kafka":
            records = mark_applied_offsets(records, spark, state.offset_ranges)
        resolved = resolve_changes(decoder.decode(records), pipeline, plan.batch_id)
        cached = resolved.drop("raw", "value", "key").persist(StorageLevel.MEMORY_AND_DISK)
        dead = _apply_all(
            spark, config, pipeline.name, decoder, resolved, cached, plan.batch_id, summary
        )
        _maybe_die("after_tables")
        _write_dead_letters(
            spark, catalog, namespace, pipeline.name, plan.batch_id, resolved, dead, summary
        )
        if summary.ddl_recorded:
            record_ddl(
                spark, catalog, namespace, pipeline.name, plan.batch_id, cached, summary.files
            )
        records_per_file, offsets = _file_stats(cached, pipeline.envelope == "kafka")
        cached.unpersist()
    _maybe_die("before_checkpoint")
    store.record_committed(plan, offsets, records_per_file, summary.to_json())
    return summary


def _apply_all(
    spark: SparkSession,
    config: Config,
    pipeline_name: str,
    decoder: object,
    resolved: DataFrame,
    cached: DataFrame,
    batch_id: int,
    summary: RunSummary,
) -> list[DataFrame]:
    """Count the batch, prepare every target table and apply its changes."""
    from cdc_ingest.formats.base import Decoder

    assert isinstance(decoder, Decoder)
    pipeline = config.pipeline(pipeline_name)
    catalog, namespace = config.catalog.name, pipeline.namespace
    ok = F.col("_cdc_error").isNull()
    is_change = ok & F.col("_cdc_kind").isin(UPSERT, DELETE)
    inventory_rows = (
        cached.groupBy(
            F.col("_cdc_kind"),
            ok.alias("ok"),
            F.when(is_change, F.col("_cdc_target")).alias("target"),
            F.when(is_change, F.col("_cdc_keys")).alias("keys"),
            F.when(is_change, F.map_keys("image")).alias("columns"),
            F.when(is_change, F.col("schema_hint")).alias("hint"),
            (F.col("row_in_message") == 0).alias("first_row"),
        )
        .agg(F.count("*").alias("count"), F.max(F.when(ok, F.col("event_ms"))).alias("newest"))
        .collect()
    )
    inventories: dict[str, TargetInventory] = {}
    for row in inventory_rows:
        summary.records += row["count"]
        if row["first_row"]:
            summary.lines += row["count"]
        if row["newest"] is not None:
            summary.freshness_ms = max(summary.freshness_ms or 0, row["newest"])
        if not row["ok"]:
            summary.dead_lettered += row["count"]
            continue
        summary.messages += row["count"]
        if row["_cdc_kind"] in (NOOP, DDL):
            summary.no_row_change += row["count"]
        if row["_cdc_kind"] == DDL:
            summary.ddl_recorded += row["count"]
        elif row["_cdc_kind"] == DUPLICATE:
            summary.already_applied += row["count"]
        if row["target"] is None:
            continue
        inv = inventories.setdefault(row["target"], TargetInventory(row["target"]))
        inv.keys = inv.keys or tuple(row["keys"])
        inv.add_columns(list(row["columns"] or []))
        if row["hint"] is not None and row["hint"] not in inv.hints:
            inv.hints.append(row["hint"])
    dead: list[DataFrame] = []
    existing = table_names(spark, catalog, namespace)
    changes = cached.where(is_change)
    for name in sorted(inventories):
        target, created = prepare_target(
            spark, catalog, namespace, existing, inventories[name], decoder, resolved
        )
        table_summary, bad = apply_table(spark, changes, target, batch_id)
        table_summary.created = created
        summary.tables[name] = table_summary
        summary.messages -= table_summary.dead_lettered
        summary.dead_lettered += table_summary.dead_lettered
        if table_summary.dead_lettered:
            dead.append(bad)
    return dead


def _write_dead_letters(
    spark: SparkSession,
    catalog: str,
    namespace: str,
    pipeline: str,
    batch_id: int,
    resolved: DataFrame,
    typing_errors: list[DataFrame],
    summary: RunSummary,
) -> None:
    """Append the batch's dead letters, once: a resumed batch that already wrote them skips."""
    if not summary.dead_lettered:
        return
    table = qualified(catalog, namespace, DEAD_LETTERS)
    decode_errors = resolved.where(F.col("_cdc_error").isNotNull()).select(
        "_cdc_file_idx",
        "_cdc_line",
        "row_in_message",
        F.col("_cdc_error").alias("reason"),
        F.col("_cdc_source").alias("source_table"),
        F.col("_cdc_target").alias("target_table"),
    )
    errors = decode_errors
    for frame in typing_errors:
        errors = errors.unionByName(frame)
    # One row per line: a message carrying several rows repeats its text in each.
    raw = resolved.where(F.col("row_in_message") == 0).select(
        "_cdc_file_idx", "_cdc_line", "raw", "kafka_topic", "kafka_partition", "kafka_offset"
    )
    files = spark.createDataFrame(list(enumerate(summary.files)), "_cdc_file_idx int, file string")
    letters = (
        errors.join(raw, ["_cdc_file_idx", "_cdc_line"])
        .join(F.broadcast(files), "_cdc_file_idx")
        .select(
            F.lit(pipeline).alias("pipeline"),
            F.lit(batch_id).cast("bigint").alias("batch_id"),
            "file",
            F.col("_cdc_line").alias("line"),
            F.col("row_in_message").alias("row"),
            "kafka_topic",
            "kafka_partition",
            "kafka_offset",
            F.when(F.col("source_table") != "", F.col("source_table")).alias("source_table"),
            F.when(F.col("target_table") != "", F.col("target_table")).alias("target_table"),
            "reason",
            "raw",
            F.lit(datetime.now(UTC).replace(tzinfo=None)).cast("timestamp").alias("recorded_at"),
        )
        .localCheckpoint(eager=True)
    )
    samples = (
        letters.orderBy("file", "line", "row")
        .select("file", "line", "row", "reason")
        .limit(DEAD_LETTER_SAMPLES)
    )
    summary.dead_letter_samples = [
        f"{r['file']}:{r['line']}{f' row {r[2]}' if r[2] else ''}: {r['reason']}"
        for r in samples.collect()
    ]
    already = (
        spark.table(table)
        .where((F.col("pipeline") == pipeline) & (F.col("batch_id") == batch_id))
        .limit(1)
        .count()
    )
    if not already:
        (
            letters.writeTo(table)
            .option("snapshot-property.cdc.pipeline", pipeline)
            .option("snapshot-property.cdc.batch-id", str(batch_id))
            .append()
        )


def _file_stats(
    cached: DataFrame, kafka: bool
) -> tuple[dict[int, int], list[tuple[int, str, int, int, int, int]]]:
    """Records per file and, for Kafka envelopes, offset ranges per file and topic partition."""
    rows = (
        cached.groupBy("_cdc_file_idx", "kafka_topic", "kafka_partition")
        .agg(
            F.min("kafka_offset").alias("lo"),
            F.max("kafka_offset").alias("hi"),
            F.count("*").alias("n"),
        )
        .collect()
    )
    per_file: dict[int, int] = {}
    offsets = []
    for r in rows:
        per_file[r["_cdc_file_idx"]] = per_file.get(r["_cdc_file_idx"], 0) + r["n"]
        if kafka and r["kafka_topic"] is not None and r["lo"] is not None:
            offsets.append(
                (
                    r["_cdc_file_idx"],
                    r["kafka_topic"],
                    r["kafka_partition"],
                    r["lo"],
                    r["hi"],
                    r["n"],
                )
            )
    return per_file, offsets
