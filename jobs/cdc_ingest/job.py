"""One micro-batch of one pipeline: plan, read, decode, apply, dead-letter, checkpoint."""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from cdc_ingest.append_only import apply_append_only
from cdc_ingest.apply import apply_table
from cdc_ingest.changes import DUPLICATE, mark_applied_offsets, resolve_changes
from cdc_ingest.checkpoint_store import CheckpointStore
from cdc_ingest.ddl_history import record_ddl
from cdc_ingest.dead_letters import write_dead_letters
from cdc_ingest.evolving_apply import TableContext, apply_with_ddl
from cdc_ingest.formats import load_decoder
from cdc_ingest.formats.base import DDL, DELETE, NOOP, UPSERT, Decoder
from cdc_ingest.landing import list_landed
from cdc_ingest.reader import read_lines, to_records
from cdc_ingest.schema_evolution import (
    EVOLVE,
    DdlEvent,
    SchemaChangeRefused,
    check_policy,
    collect_ddl,
    ignored_rows,
)
from cdc_ingest.spark_session import configure_catalog
from cdc_ingest.summary import RunSummary, TableSummary
from cdc_ingest.tables import ensure_system_tables, qualified
from cdc_ingest.target_schema import TargetInventory, image_sample, prepare_target, table_keys

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.config import Config

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
    decoder = load_decoder(pipeline.format, pipeline.options)
    catalog, namespace = config.catalog.name, pipeline.namespace
    listing = list_landed(pipeline.landing)
    configure_catalog(spark, config.catalog)
    existing = ensure_system_tables(spark, catalog, namespace)
    store = CheckpointStore(spark, catalog, namespace, pipeline.name)
    state = store.load()
    plan = store.plan(listing, state)
    summary = RunSummary(pipeline=pipeline.name)
    if plan.empty:
        return summary
    summary.batch_id, summary.resumed = plan.batch_id, plan.resumed
    summary.files = [f.uri for f in plan.files]
    summary.duplicate_files = dict(plan.duplicates)
    stats = FileStats()
    with ThreadPoolExecutor(max_workers=1) as pool:
        planned: Future[None] | None = None
        if not plan.resumed and plan.files:
            # The plan's commit overlaps the batch's first pass, which changes no table; it is
            # awaited before any table is created or changed.
            planned = pool.submit(store.record_planned, plan)
        if not plan.files:
            _maybe_die("after_plan")
        else:
            landed = to_records(read_lines(spark, summary.files), pipeline.envelope)
            records = landed
            if pipeline.envelope == "kafka":
                records = mark_applied_offsets(records, spark, state.offset_ranges)
            resolved = resolve_changes(
                decoder.decode(records),
                pipeline,
                plan.batch_id,
                decoder.deletes_without_table,
                decoder.keyless_tables_append_only,
            )
            cached = _batch(resolved, decoder).persist(StorageLevel.MEMORY_AND_DISK)
            batch = Batch(plan.batch_id, resolved, cached, existing, catalog, namespace)
            inventory = _inventory(batch, summary, stats)
            if planned is not None:
                planned.result()
            _maybe_die("after_plan")
            events = collect_ddl(cached) if summary.ddl_recorded else []
            try:
                check_policy(spark, catalog, pipeline, batch.existing, inventory.tables, events)
            except SchemaChangeRefused:
                record_ddl(
                    spark,
                    catalog,
                    namespace,
                    pipeline.name,
                    plan.batch_id,
                    cached,
                    summary.files,
                    events,
                )
                raise
            dead = _apply_all(
                spark, config, pipeline.name, decoder, batch, inventory, summary, events
            )
            _maybe_die("after_tables")
            write_dead_letters(
                spark,
                catalog,
                namespace,
                pipeline.name,
                plan.batch_id,
                cached,
                landed,
                dead,
                summary,
            )
            if summary.ddl_recorded:
                summary.add_ddl_outcomes(events)
                record_ddl(
                    spark,
                    catalog,
                    namespace,
                    pipeline.name,
                    plan.batch_id,
                    cached,
                    summary.files,
                    events,
                )
            cached.unpersist()
    _maybe_die("before_checkpoint")
    offsets = stats.offsets() if pipeline.envelope == "kafka" else []
    store.record_committed(plan, offsets, stats.records, summary.to_json())
    return summary


@dataclass(frozen=True)
class Batch:
    """One batch's decoded records.

    Attributes:
        batch_id: the batch.
        resolved: every record, decoded (not cached: reading it re-reads and re-parses the files).
        cached: the columns the rest of the job needs, cached; ``raw`` only for decode errors.
        existing: tables of the namespace when the run started.
        catalog: the catalog.
        namespace: the pipeline's namespace.
    """

    batch_id: int
    resolved: DataFrame
    cached: DataFrame
    existing: set[str]
    catalog: str
    namespace: str


@dataclass(frozen=True)
class Inventory:
    """The batch's target tables and how many changes each receives."""

    tables: dict[str, TargetInventory]
    rows: dict[str, int]
    # Deletes that name no table, and their key columns: they apply to every table keyed so.
    tableless_deletes: int = 0
    tableless_keys: tuple[str, ...] = ()


@dataclass
class FileStats:
    """Records per file and, for Kafka envelopes, offsets per file and topic partition."""

    records: dict[int, int] = field(default_factory=dict)
    ranges: dict[tuple[int, str, int], list[int]] = field(default_factory=dict)

    def add(self, row: Row) -> None:
        """Fold in one inventory row."""
        idx = row["_cdc_file_idx"]
        self.records[idx] = self.records.get(idx, 0) + row["count"]
        if row["kafka_topic"] is None or row["lo"] is None:
            return
        part = (idx, row["kafka_topic"], row["kafka_partition"])
        lo, hi, n = self.ranges.get(part, [row["lo"], row["hi"], 0])
        self.ranges[part] = [min(lo, row["lo"]), max(hi, row["hi"]), n + row["count"]]

    def offsets(self) -> list[tuple[int, str, int, int, int, int]]:
        """(file_idx, topic, partition, min_offset, max_offset, records) per file and partition."""
        return [(i, t, p, lo, hi, n) for (i, t, p), (lo, hi, n) in self.ranges.items()]


def _batch(resolved: DataFrame, decoder: Decoder) -> DataFrame:
    """The columns to cache: what inventory, apply, dead letters and file stats read."""
    return resolved.select(
        "_cdc_file_idx",
        "_cdc_line",
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        "op",
        "image",
        "key_values",
        "row_in_message",
        "event_ms",
        "ddl",
        "schema_hint",
        "_cdc_kind",
        "_cdc_target",
        "_cdc_source",
        "_cdc_keys",
        "_cdc_key",
        "_cdc_order",
        "_cdc_error",
        F.when(F.col("_cdc_error").isNotNull(), F.col("raw")).alias("raw"),
        image_sample(decoder),
    )


def _inventory(batch: Batch, summary: RunSummary, stats: FileStats) -> Inventory:
    """Count the batch and list its target tables, in one pass that also caches the batch."""
    ok = F.col("_cdc_error").isNull()
    is_change = ok & F.col("_cdc_kind").isin(UPSERT, DELETE)
    inventory_rows = (
        batch.cached.groupBy(
            F.col("_cdc_file_idx"),
            F.col("kafka_topic"),
            F.col("kafka_partition"),
            F.col("_cdc_kind"),
            ok.alias("ok"),
            F.when(is_change, F.col("_cdc_target")).alias("target"),
            F.when(is_change, F.col("_cdc_keys")).alias("keys"),
            F.when(is_change, F.map_keys("image")).alias("columns"),
            F.when(is_change, F.col("schema_hint")).alias("hint"),
            (F.col("row_in_message") == 0).alias("first_row"),
        )
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.min("kafka_offset").alias("lo"),
            F.max("kafka_offset").alias("hi"),
            F.max(F.when(ok, F.col("event_ms"))).alias("newest"),
        )
        .collect()
    )
    inventories: dict[str, TargetInventory] = {}
    rows: dict[str, int] = {}
    tableless, tableless_keys = 0, tuple[str, ...]()
    for row in inventory_rows:
        stats.add(row)
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
            if row["_cdc_kind"] == DELETE and row["keys"] is not None:
                tableless += row["count"]
                tableless_keys = tuple(row["keys"])
            continue
        rows[row["target"]] = rows.get(row["target"], 0) + row["count"]
        inv = inventories.setdefault(row["target"], TargetInventory(row["target"]))
        inv.keys = inv.keys or tuple(row["keys"])
        inv.add_columns(list(row["columns"] or []))
        if row["hint"] is not None and row["hint"] not in inv.hints:
            inv.hints.append(row["hint"])
    summary.deletes_without_table = tableless
    return Inventory(inventories, rows, tableless, tableless_keys)


def _fan_out_tableless_deletes(spark: SparkSession, batch: Batch, inventory: Inventory) -> set[str]:
    """Aim deletes that name no table at every table keyed like them; returns those tables.

    An Aerospike delete carries no set, but its digest identifies the record in the whole
    namespace: deleting it from every table keyed by the digest deletes exactly that record.
    """
    keys = inventory.tableless_keys
    tables = {n for n, inv in inventory.tables.items() if inv.keys == keys}
    for name in sorted(batch.existing - set(inventory.tables)):
        if name.startswith("_cdc_"):
            continue
        identifier = qualified(batch.catalog, batch.namespace, name)
        if table_keys(spark, identifier) == keys:
            tables.add(name)
            inventory.tables[name] = TargetInventory(name, keys)
            inventory.rows[name] = 0
    for name in tables:
        inventory.rows[name] += inventory.tableless_deletes
    return tables


def _apply_all(
    spark: SparkSession,
    config: Config,
    pipeline_name: str,
    decoder: Decoder,
    batch: Batch,
    inventory: Inventory,
    summary: RunSummary,
    events: list[DdlEvent],
) -> list[DataFrame]:
    """Prepare every target table and apply its changes and statements; returns typing errors."""
    pipeline = config.pipeline(pipeline_name)
    evolve = pipeline.schema_changes == EVOLVE
    is_change = F.col("_cdc_error").isNull() & F.col("_cdc_kind").isin(UPSERT, DELETE)
    dead: list[DataFrame] = []
    changes = batch.cached.where(is_change)
    fan_out: set[str] = set()
    if inventory.tableless_deletes:
        fan_out = _fan_out_tableless_deletes(spark, batch, inventory)
        summary.deletes_without_table_tables = sorted(fan_out)
    by_table: dict[str, list[DdlEvent]] = {}
    for event in events if evolve else []:
        by_table.setdefault(event.target, []).append(event)
    ctx = TableContext(
        spark,
        batch.catalog,
        batch.namespace,
        batch.existing,
        decoder,
        batch.cached,
        batch.resolved,
        batch.batch_id,
    )
    # Tables with statements first, in stream order: a renamed table must be renamed before the
    # rows that already carry its new name are applied.
    ordered = sorted(by_table, key=lambda n: by_table[n][0].position)
    ordered += sorted(n for n in inventory.tables if n not in by_table)
    for name in ordered:
        base = inventory.tables.get(name) or TargetInventory(name)
        if name in by_table:
            table_summary, errors = apply_with_ddl(ctx, name, by_table[name], changes, base)
            dead += errors
        else:
            table_summary, bad = _apply_plain(ctx, name, base, inventory, changes, fan_out, evolve)
            dead.append(bad)
            if not evolve:
                identifier = qualified(ctx.catalog, ctx.namespace, name)
                summary.ignored_values += ignored_rows(spark, changes, name, identifier)
        if table_summary.messages or table_summary.created or table_summary.dead_lettered:
            summary.tables[name] = table_summary
        summary.messages -= table_summary.dead_lettered
        summary.dead_lettered += table_summary.dead_lettered
    return dead


def _apply_plain(
    ctx: TableContext,
    name: str,
    base: TargetInventory,
    inventory: Inventory,
    changes: DataFrame,
    fan_out: set[str],
    evolve: bool,
) -> tuple[TableSummary, DataFrame]:
    """One table without statements in the batch: one segment."""
    target, created = prepare_target(
        ctx.spark,
        ctx.catalog,
        ctx.namespace,
        ctx.existing,
        base,
        ctx.decoder,
        ctx.cached,
        ctx.resolved,
        evolve,
    )
    ctx.existing.add(name)
    mine = changes
    if name in fan_out:
        mine = changes.withColumn("_cdc_target", F.coalesce("_cdc_target", F.lit(name)))
    rows = inventory.rows.get(name, 0)
    if target.keys:
        table_summary, bad = apply_table(ctx.spark, mine, target, ctx.batch_id, rows, created)
    else:
        table_summary, bad = apply_append_only(ctx.spark, mine, target, ctx.batch_id, rows)
        table_summary.append_only = True
    table_summary.created = created
    return table_summary, bad
