"""One micro-batch of one pipeline: plan, read, decode, apply, dead-letter, record, checkpoint."""

from __future__ import annotations

import functools
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame

from cdc_ingest.apply.batch import apply_all_tables
from cdc_ingest.changes.inventory import Batch, FileStats, Inventory, cached_columns, take_inventory
from cdc_ingest.changes.resolve import mark_applied_offsets, resolve_changes
from cdc_ingest.fault_injection import install_commit_fault, maybe_die
from cdc_ingest.formats import load_decoder
from cdc_ingest.landing.reader import read_lines, to_records
from cdc_ingest.landing.zones import (
    MISSING,
    FileCheck,
    LandingError,
    changed_while_read,
    check_planned,
    list_landed,
)
from cdc_ingest.record.batches import record_batch
from cdc_ingest.record.ddl_history import record_ddl
from cdc_ingest.record.dead_letters import decode_error_samples, write_dead_letters
from cdc_ingest.run.modes import (
    ddl_events,
    drop_rebuilt,
    plan_batch,
    prepare_resolved,
    replay_config,
    restrict,
)
from cdc_ingest.run.options import RunOptions, RunRefused
from cdc_ingest.schema.evolution import (
    SchemaChangeRefused,
    check_policy,
    collect_ddl,
)
from cdc_ingest.spark_session import configure_catalog, release
from cdc_ingest.state.checkpoints import CheckpointState, CheckpointStore
from cdc_ingest.state.summary import RunSummary, TableSummary
from cdc_ingest.state.tables import CHECKPOINTS, ensure_system_tables, existing_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.config import Config


class _Clock:
    """Wall time of the run and of its phases."""

    def __init__(self) -> None:
        self.started = datetime.now(UTC)
        self.start = self.last = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = round(now - self.last, 3)
        self.last = now

    def finish(self, summary: RunSummary) -> RunSummary:
        summary.phase_seconds = dict(self.phases)
        summary.finished_at = datetime.now(UTC).isoformat()
        summary.duration_s = round(time.perf_counter() - self.start, 3)
        return summary


def run_pipeline(
    spark: SparkSession, config: Config, pipeline_name: str, options: RunOptions | None = None
) -> RunSummary:
    """Apply every landed file of a pipeline not applied yet, as one micro-batch.

    Args:
        spark: the session.
        config: the pipelines file.
        pipeline_name: the pipeline to run.
        options: tables, dry run, file cap and run id (see :class:`RunOptions`).

    Raises:
        ConfigError: unknown pipeline.
        LandingError: the landing zone cannot be listed or a file cannot be read.
        RunRefused: ``tables`` given while a batch is pending.
    """
    options = options or RunOptions()
    install_commit_fault()
    clock = _Clock()
    pipeline = config.pipeline(pipeline_name)
    decoder = load_decoder(pipeline.format, pipeline.options)
    catalog, namespace = config.catalog.name, pipeline.namespace
    listing = list_landed(pipeline.landing)
    configure_catalog(spark, config.catalog)
    if options.dry_run:
        existing = existing_tables(spark, catalog, namespace)
    else:
        existing = ensure_system_tables(spark, catalog, namespace)
    store = CheckpointStore(spark, catalog, namespace, pipeline.name)
    state = store.load() if CHECKPOINTS in existing else CheckpointState()
    if options.tables and state.pending_batch_id is not None:
        raise RunRefused(
            f"batch {state.pending_batch_id} was planned and not committed: "
            "run without tables to finish it first"
        )
    if options.landed is not None or options.rebuild_tables:
        plan = plan_batch(spark, config, pipeline.name, store, state, listing, options)
    else:
        plan = store.plan(listing, state, options.max_files)
    clock.lap("plan")
    summary = RunSummary(
        pipeline=pipeline.name,
        dry_run=options.dry_run,
        only_tables=sorted(set(options.tables)),
        max_files=options.max_files,
        deferred_files=plan.deferred,
        started_at=clock.started.isoformat(),
        changed_after_applied=plan.changed_after_applied,
    )
    if plan.empty:
        return clock.finish(summary)
    summary.batch_id, summary.resumed = plan.batch_id, plan.resumed
    summary.files = [f.uri for f in plan.files]
    summary.duplicate_files = dict(plan.duplicates)
    if plan.replay is not None:
        of_batches = {f.uri: b for f, (b, _) in zip(plan.files, plan.origins, strict=True)}
        summary.replay = {**plan.replay, "of_batches": of_batches}
    run_config = replay_config(config, plan)
    # Only a full, real run is a batch of the checkpoint: planned first, committed last.
    commits = not options.dry_run and not options.tables
    # A replay's or rebuild's DDL is already in the history (its first application wrote it).
    records_ddl = commits and plan.replay is None
    stats = FileStats()
    left_out: dict[int, FileCheck] = {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        planned: Future[None] | None = None
        if commits and not plan.resumed and plan.files:
            # The plan's commit overlaps the batch's first pass, which changes no table; it is
            # awaited before any table is created or changed.
            planned = pool.submit(store.record_planned, plan)
        if not plan.files:
            maybe_die("after_plan")
        else:
            # A resumed or replayed plan was listed by an earlier run: its files are hashed again.
            left_out, seen = check_planned(
                plan.files, rehash=plan.resumed or plan.replay is not None
            )
            for i, check in left_out.items():
                kind = summary.missing_files if check.status == MISSING else summary.changed_files
                kind[plan.files[i].uri] = check.reason
            lines = read_lines(spark, plan.files, leave_out=left_out)
            landed = to_records(lines, pipeline.envelope)
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
            if plan.replay is not None:
                resolved = prepare_resolved(spark, resolved, plan, catalog, namespace, existing)
            # Filled by the inventory's pass. Rows in a local checkpoint cost less CPU to store and
            # to read again than a columnar cache; a lost executor fails the batch (safe to rerun)
            # instead of re-reading the files.
            cached = cached_columns(
                resolved, decoder.unavailable_values, decoder.before_half_ops
            ).localCheckpoint(eager=False)
            batch = Batch(plan.batch_id, resolved, cached, existing, catalog, namespace)
            inventory = take_inventory(batch, summary, stats)
            # The batch is in the local checkpoint now: a file that moved while it was read may
            # be half old, half new. Nothing is applied; the rerun leaves it out.
            moved = changed_while_read(seen, [i for i in range(len(seen)) if i not in left_out])
            if moved:
                raise LandingError(
                    f"{len(moved)} landed files changed while they were read ({moved[0]}); "
                    "nothing was applied: rerun, and the batch leaves them out"
                )
            restrict(inventory, existing, plan, summary)
            clock.lap("decode")
            if planned is not None:
                planned.result()
            maybe_die("after_plan")
            if commits:
                drop_rebuilt(spark, catalog, namespace, plan, existing)
            dead: list[DataFrame] = []
            events = collect_ddl(cached, pipeline.table) if summary.ddl_recorded else []
            if plan.replay is not None:
                events = ddl_events(events, plan)
            save_ddl = functools.partial(
                record_ddl,
                spark,
                catalog,
                namespace,
                pipeline.name,
                plan.batch_id,
                cached,
                summary.files,
                events,
            )
            if not options.dry_run:
                try:
                    policy = run_config.pipeline(pipeline.name)
                    check_policy(spark, catalog, policy, existing, inventory.tables, events)
                except SchemaChangeRefused:
                    if records_ddl:
                        save_ddl()
                    raise
            if options.dry_run:
                _dry_run_tables(inventory, existing, summary)
                summary.dead_letter_samples = decode_error_samples(batch, summary.files)
            else:
                dead = apply_all_tables(
                    spark, run_config, pipeline.name, decoder, batch, inventory, summary, events
                )
                clock.lap("apply")
                maybe_die("after_tables")
            if commits:
                write_dead_letters(
                    spark,
                    catalog,
                    namespace,
                    pipeline.name,
                    batch,
                    landed,
                    dead,
                    summary,
                    only_new=plan.replay is not None,
                )
                if summary.ddl_recorded:
                    summary.add_ddl_outcomes(events)
                if summary.ddl_recorded and records_ddl:
                    save_ddl()
                clock.lap("dead_letters")
            release(cached)
    offsets = stats.offsets() if pipeline.envelope == "kafka" else []
    summary.kafka_offsets = [
        {"file": summary.files[i], "topic": t, "partition": p, "min_offset": lo, "max_offset": hi}
        | {"records": n}
        for i, t, p, lo, hi, n in offsets
    ]
    clock.finish(summary)
    if options.dry_run:
        return summary
    record_batch(spark, catalog, namespace, summary, options.run_id)
    if commits:
        maybe_die("before_checkpoint")
        store.record_committed(plan, offsets, stats.records, summary.to_json(), left_out)
    return summary


def _dry_run_tables(inventory: Inventory, existing: set[str], summary: RunSummary) -> None:
    """What a dry run reports per table: the changes aimed at it, and whether it is new."""
    for name, count in inventory.rows.items():
        summary.tables[name] = TableSummary(name, messages=count, created=name not in existing)
