"""One micro-batch of one pipeline, as a sequence of stages over one run context.

plan -> read -> decode -> resolve -> count -> apply -> record -> commit

- **plan**: list the landing zone, load the checkpoint, choose the run's mode, plan its files.
- **read**: check each planned file against its plan, read its lines (exact file and line).
- **decode**: the format's decoder adds the change columns (``cdc_ingest.contract``).
- **resolve**: target table, key and full ordering value of each change (and, for a replay, the
  positions of its first application).
- **count**: the first pass over the batch, which caches it: counts, target tables, file stats.
- **apply**: per table, type the row images, collapse each key to its newest change, classify it
  against the table and MERGE (``cdc_ingest.apply``); DDL in stream order.
- **record**: dead letters, DDL history and the batch's row of ``_cdc_batches``.
- **commit**: seal the batch in ``_cdc_checkpoints``.

The mode (``cdc_ingest.run.modes``) is chosen once, while planning: it supplies the plan, the
tables the run is restricted to and which of the recorders run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cdc_ingest.apply.batch import apply_all_tables
from cdc_ingest.apply.write_policy import WritePolicy
from cdc_ingest.changes.inventory import (
    Batch,
    FileStats,
    Inventory,
    cached_columns,
    take_inventory,
)
from cdc_ingest.changes.resolve import mark_applied_offsets, resolve_changes
from cdc_ingest.fault_injection import install_commit_fault, maybe_die
from cdc_ingest.landing.containers import read_container_records
from cdc_ingest.landing.planned_files import (
    MISSING,
    FileCheck,
    changed_while_read,
    check_planned,
)
from cdc_ingest.landing.reader import read_lines, to_records
from cdc_ingest.landing.zones import LandingError
from cdc_ingest.record.batches import record_batch
from cdc_ingest.record.ddl_history import record_ddl
from cdc_ingest.record.dead_letters import decode_error_samples, write_dead_letters
from cdc_ingest.run.context import RunContext, open_run
from cdc_ingest.run.modes import RunMode, choose_mode
from cdc_ingest.run.options import RunOptions
from cdc_ingest.schema.evolution import SchemaChangeRefused, check_policy, collect_ddl
from cdc_ingest.spark_session import driver_ran_out_of_memory, release
from cdc_ingest.stages import StageTimings, current, recording, stage
from cdc_ingest.state.summary import RunSummary, TableSummary
from cdc_ingest.writers.routing import table_writer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.config import Config
    from cdc_ingest.landing.zones import LandedFile
    from cdc_ingest.schema.evolution import DdlEvent
    from cdc_ingest.state.checkpoints import BatchPlan


# A batch of at most this many landed bytes is kept in one partition (its first pass is one task of
# well under a second): every later aggregation, collapse and join of it then needs no shuffle, as
# one partition holding all rows is clustered by any key. Each shuffle of a small batch cost a
# Spark job of its own (its map side) besides the query's, most of what a 10-line batch paid.
ONE_PARTITION = 4 << 20


def run_pipeline(
    spark: SparkSession,
    config: Config,
    pipeline_name: str,
    options: RunOptions | None = None,
    writes: WritePolicy | None = None,
) -> RunSummary:
    """Apply every landed file of a pipeline not applied yet, as one micro-batch.

    Stage timings go to the timings being recorded (see ``cdc_ingest.stages``), if any, and the
    top-level ones to the summary's ``phase_seconds``.

    Args:
        spark: the session.
        config: the pipelines file.
        pipeline_name: the pipeline to run.
        options: tables, dry run, file cap, run id, replay or rebuild (see :class:`RunOptions`).
        writes: what chooses each table's write route (the defaults unless a test takes a route
            at its own sizes).

    Raises:
        ConfigError: unknown pipeline.
        LandingError: the landing zone cannot be listed or a file cannot be read.
        RunRefused: ``tables`` given while a batch is pending.
        ReplayRefused: a replay or rebuild that cannot be run as asked.
    """
    options = options or RunOptions()
    install_commit_fault()
    started, start = datetime.now(UTC), time.perf_counter()
    writer = table_writer(spark, config.catalog, (writes or WritePolicy()).pyiceberg)
    with recording(current() or StageTimings()) as timings, writer as opened:
        with stage("plan"):
            run = open_run(spark, config, pipeline_name, options, opened, writes)
            mode = choose_mode(options, run.state)
            plan = mode.kind.plan(run)
        summary = new_summary(run, mode, plan, started)
        stats, left_out = FileStats(), dict[int, FileCheck]()
        if plan.files:
            with _out_of_memory_named(spark, plan):
                with _planned_recorded(run, mode, plan) as await_planned:
                    with stage("read"):
                        landed, seen, left_out = read(run, mode, plan, summary)
                    with stage("decode"):
                        decoded = decode(run, landed)
                    with stage("resolve"):
                        resolved = resolve(run, mode, plan, decoded)
                    with stage("count"):
                        batch, inventory = count(run, mode, plan, resolved, summary, stats)
                        _fail_if_moved(seen, left_out)
                        mode.kind.restrict(inventory, run.existing, summary)
                    await_planned()
                maybe_die("after_plan")
                with stage("apply"):
                    events, dead = apply(run, mode, batch, inventory, summary)
                with stage("record"):
                    record(run, mode, batch, landed, dead, events, summary)
                release(batch.cached)
        elif not plan.empty:
            maybe_die("after_plan")  # a batch of duplicates only
        summary.kafka_offsets = _offsets(stats, summary) if run.pipeline.kafka_coordinates else []
        summary.phase_seconds = timings.top_level()
        summary.finished_at = datetime.now(UTC).isoformat()
        summary.duration_s = round(time.perf_counter() - start, 3)
        if not plan.empty and mode.effect.records_batch:
            with stage("commit"):
                commit(run, mode, plan, stats, summary, left_out)
    return summary


class DriverOutOfMemory(RuntimeError):
    """The driver's JVM ran out of heap applying a batch: rerun it with a larger one."""


@contextlib.contextmanager
def _out_of_memory_named(spark: SparkSession, plan: BatchPlan) -> Iterator[None]:
    """A driver JVM that an OutOfMemoryError ended, as one error naming the batch's files
    (py4j sees only a connection refused). The batch stays planned: its rerun resumes it."""
    from py4j.protocol import Py4JError

    try:
        yield
    except (Py4JError, ConnectionError) as exc:
        if not driver_ran_out_of_memory(spark):
            raise
        files = [f.uri.rsplit("/", 1)[-1] for f in plan.files]
        shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        raise DriverOutOfMemory(
            f"the Spark driver ran out of memory (spark.driver.memory) in batch "
            f"{plan.batch_id}, files {shown}: rerun with a larger spark.driver.memory "
            "(SPARK_DRIVER_MEMORY, or spark.conf in the pipelines file) to finish the batch "
            "(docs/semantics.md, long lines)"
        ) from exc


def new_summary(run: RunContext, mode: RunMode, plan: BatchPlan, started: datetime) -> RunSummary:
    """The run's summary as the plan describes it."""
    summary = RunSummary(
        pipeline=run.pipeline.name,
        dry_run=not mode.effect.writes_tables,
        only_tables=list(mode.only_tables),
        max_files=run.options.max_files,
        deferred_files=plan.deferred,
        started_at=started.isoformat(),
        changed_after_applied=plan.changed_after_applied,
        unreadable_files=plan.unreadable,
        not_files=dict(run.not_files),
    )
    if plan.empty:
        return summary
    summary.batch_id, summary.resumed = plan.batch_id, plan.resumed
    summary.files = [f.uri for f in plan.files]
    summary.duplicate_files = dict(plan.duplicates)
    if plan.replay is not None:
        of_batches = {f.uri: b for f, (b, _) in zip(plan.files, plan.origins, strict=True)}
        summary.replay = {**plan.replay, "of_batches": of_batches}
    return summary


@contextlib.contextmanager
def _planned_recorded(
    run: RunContext, mode: RunMode, plan: BatchPlan
) -> Iterator[Callable[[], None]]:
    """Record the plan (a batch of the checkpoint is planned first) while the first pass runs.

    The first pass changes no table; the plan's commit is awaited (the yielded function) before
    any table is created or changed.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        if mode.effect.commits and not plan.resumed:
            yield pool.submit(run.store.record_planned, plan).result
        else:
            yield lambda: None


def read(
    run: RunContext, mode: RunMode, plan: BatchPlan, summary: RunSummary
) -> tuple[DataFrame, list[LandedFile], dict[int, FileCheck]]:
    """The planned files' records, what was seen of each file, and the files left out.

    A file deleted or changed since it was planned is left out and named in the summary. A plan
    listed by an earlier run (resumed, replayed) has its files hashed again.
    """
    left_out, seen = check_planned(plan.files, rehash=plan.resumed or mode.kind.rehashes)
    for i, check in left_out.items():
        kind = summary.missing_files if check.status == MISSING else summary.changed_files
        kind[plan.files[i].uri] = check.reason
    if run.pipeline.file_format != "json":
        records = read_container_records(
            run.spark,
            plan.files,
            run.pipeline.file_format,
            run.decoder.embeds_connect_schema,
            leave_out=list(left_out),
        )
        return records, seen, left_out
    lines = read_lines(run.spark, plan.files, leave_out=left_out)
    return to_records(lines, run.pipeline.envelope), seen, left_out


def decode(run: RunContext, landed: DataFrame) -> DataFrame:
    """The format's change columns on every record (Kafka records an earlier batch applied are
    marked duplicates)."""
    records = landed
    if run.pipeline.kafka_coordinates:
        records = mark_applied_offsets(records, run.spark, run.state.offset_ranges)
    return run.decoder.decode_changes(records)


def resolve(run: RunContext, mode: RunMode, plan: BatchPlan, decoded: DataFrame) -> DataFrame:
    """Target table, key and ordering value of each change, as the mode applies them."""
    resolved = resolve_changes(
        decoded,
        run.pipeline,
        plan.batch_id,
        run.decoder.deletes_without_table,
        run.decoder.keyless_tables_append_only,
    )
    return mode.kind.prepare(run, resolved, plan)


def count(
    run: RunContext,
    mode: RunMode,
    plan: BatchPlan,
    resolved: DataFrame,
    summary: RunSummary,
    stats: FileStats,
) -> tuple[Batch, Inventory]:
    """The first pass: it reads, decodes and caches the batch, and counts it.

    Rows in a local checkpoint cost less CPU to store and to read again than a columnar cache; a
    lost executor fails the batch (safe to rerun) instead of re-reading the files.
    """
    decoder = run.decoder
    cached = cached_columns(resolved, decoder.unavailable_values, decoder.before_half_ops)
    if all(f.size > 0 for f in plan.files) and sum(f.size for f in plan.files) <= ONE_PARTITION:
        cached = cached.coalesce(1)
    batch = Batch(
        plan.batch_id,
        resolved,
        cached.localCheckpoint(eager=False),
        run.existing,
        run.catalog,
        run.namespace,
        tuple(_epoch_ms(run.pipeline.landed_at.landed(f)) for f in plan.files),
    )
    return batch, take_inventory(batch, summary, stats)


def _epoch_ms(instant: datetime | None) -> int | None:
    return None if instant is None else int(instant.timestamp() * 1000)


def _fail_if_moved(seen: list[LandedFile], left_out: dict[int, FileCheck]) -> None:
    """The batch is in the local checkpoint now: a file that moved while it was read may be half
    old, half new. Nothing is applied; the rerun leaves it out."""
    moved = changed_while_read(seen, [i for i in range(len(seen)) if i not in left_out])
    if moved:
        raise LandingError(
            f"{len(moved)} landed files changed while they were read ({moved[0]}); "
            "nothing was applied: rerun, and the batch leaves them out"
        )


def apply(
    run: RunContext, mode: RunMode, batch: Batch, inventory: Inventory, summary: RunSummary
) -> tuple[list[DdlEvent], list[DataFrame]]:
    """Apply the batch's changes and statements to its tables; returns its statements (with
    their outcomes) and its typing errors. A dry run only reports the tables."""
    lowercase = run.pipeline.column_names == "lowercase"
    events = (
        collect_ddl(
            batch.cached,
            run.pipeline.table,
            lowercase,
            by_order=run.decoder.statements_apart,
            routes=run.pipeline.routes,
        )
        if summary.ddl_recorded
        else []
    )
    events = mode.kind.statements(events)
    if not mode.effect.writes_tables:
        for name, messages in inventory.rows.items():
            created = name not in run.existing
            summary.tables[name] = TableSummary(name, messages=messages, created=created)
        summary.dead_letter_samples = decode_error_samples(batch, summary.files)
        return events, []
    if mode.effect.commits:
        mode.kind.before_apply(run)
    config = mode.kind.config(run.config)
    try:
        policy = config.pipeline(run.pipeline.name)
        decision = check_policy(
            run.spark,
            run.catalog,
            policy,
            run.decoder,
            run.existing,
            inventory.tables,
            events,
        )
    except SchemaChangeRefused:
        if mode.records_ddl:
            _ddl_recorder(run, batch, summary, events)()
        raise
    # A mode changes the pipelines, never the catalog: the run's writer serves.
    writes = _write_policy(run)
    dead = apply_all_tables(
        run.spark,
        config,
        run.pipeline.name,
        run.decoder,
        batch,
        inventory,
        summary,
        events,
        only=mode.restricted_to,
        appends=mode.appends,
        writer=writes.mirrors_writer(run.writer),
        decision=decision,
        writes=writes,
    )
    maybe_die("after_tables")
    return events, dead


def _write_policy(run: RunContext) -> WritePolicy:
    """The run's write policy. With lineage on, mirrors are created and written by Spark, whose
    OpenLineage listener reports each write (pyiceberg's writes are not Spark jobs, so it would
    see none)."""
    if run.config.lineage is None:
        return run.writes
    return dataclasses.replace(run.writes, pyiceberg=False)


def record(
    run: RunContext,
    mode: RunMode,
    batch: Batch,
    landed: DataFrame,
    dead: list[DataFrame],
    events: list[DdlEvent],
    summary: RunSummary,
) -> None:
    """The batch's dead letters and DDL history, when the mode writes them."""
    if not mode.records_dead_letters:
        return
    write_dead_letters(
        run.spark,
        run.catalog,
        run.namespace,
        run.pipeline.name,
        batch,
        landed,
        dead,
        summary,
        only_new=mode.kind.only_new_dead_letters,
    )
    if summary.ddl_recorded:
        summary.add_ddl_outcomes(events)
        if mode.records_ddl:
            _ddl_recorder(run, batch, summary, events)()


def _ddl_recorder(
    run: RunContext, batch: Batch, summary: RunSummary, events: list[DdlEvent]
) -> Callable[[], None]:
    return functools.partial(
        record_ddl,
        run.spark,
        run.catalog,
        run.namespace,
        run.pipeline.name,
        batch.batch_id,
        batch.cached,
        summary.files,
        events,
    )


def commit(
    run: RunContext,
    mode: RunMode,
    plan: BatchPlan,
    stats: FileStats,
    summary: RunSummary,
    left_out: dict[int, FileCheck],
) -> None:
    """The batch's row of ``_cdc_batches``, then (a batch of the checkpoint) its commit."""
    record_batch(run.spark, run.catalog, run.namespace, summary, run.options.run_id, run.writer)
    if not mode.effect.commits:
        return
    maybe_die("before_checkpoint")
    offsets = stats.offsets() if run.pipeline.kafka_coordinates else []
    run.store.record_committed(plan, offsets, stats.records, summary.to_json(), left_out)


def _offsets(stats: FileStats, summary: RunSummary) -> list[dict[str, object]]:
    return [
        {"file": summary.files[i], "topic": t, "partition": p, "min_offset": lo, "max_offset": hi}
        | {"records": n}
        for i, t, p, lo, hi, n in stats.offsets()
    ]
