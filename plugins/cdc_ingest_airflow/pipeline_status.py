"""What the cdc-ingest status page shows, read from the catalog with pyiceberg: no JVM, no pyspark.

:func:`gather` reads the pipelines file and, per pipeline, the namespace's ``_cdc_checkpoints``,
``_cdc_batches``, ``_cdc_dead_letters`` and ``_cdc_ddl_history`` rows, the mirrored tables'
snapshot summaries and the landing zone's listing. Nothing here raises for a problem of one
pipeline or of the catalog: a missing landing zone, a namespace without tables or an unreadable
catalog end up in the result's ``problems`` so that the page can say so.

pyiceberg is imported when :func:`gather` runs, never when the Airflow plugin is loaded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cdc_ingest.catalog.properties import scrub, secret_values
from cdc_ingest.config import CatalogConfig, PipelineConfig, load_config
from cdc_ingest.landing.zones import list_landed
from cdc_ingest.read_debt import ReadDebt
from cdc_ingest.state.lake import (
    CatalogMissing,
    checkpoint_state,
    open_catalog,
    pending_work,
    pipeline_rows,
)
from cdc_ingest.state.tables import BATCHES, CHECKPOINTS, DDL_HISTORY, DEAD_LETTERS

from cdc_ingest_airflow.aws_connection import catalog_environment
from cdc_ingest_airflow.status_health import assess
from cdc_ingest_airflow.status_model import (
    BatchPoint,
    BatchStatus,
    CheckpointStatus,
    DdlRecord,
    DeadLetter,
    Overview,
    PipelineStatus,
    TableStatus,
    dag_id,
    redact,
)

# Dead letters of the newest batches only: a pipeline can hold millions of them.
DEAD_LETTER_BATCHES = 5
RECENT_DEAD_LETTERS = 20
RECENT_DDL = 20
RAW_CHARS = 200
PENDING_LISTED = 50
HISTORY = 50  # batches charted per pipeline
# Not ``summary``, ``kafka_offsets`` and the like: the page needs the counts only.
BATCH_FIELDS = (
    "batch_id",
    "partial",
    "run_id",
    "finished_at",
    "duration_s",
    "files",
    "lines",
    "messages",
    "dead_lettered",
    "ddl_recorded",
    "inserted",
    "updated",
    "deleted",
    "table_counts",
    "freshness_ms",
    "recorded_at",
)


def gather(config_path: str | None, now: datetime | None = None) -> Overview:
    """Read the status of every pipeline of a pipelines file.

    Args:
        config_path: the pipelines file (``$CDC_INGEST_CONFIG``); None or empty when unset.
        now: the time freshness lags are measured to (default: now, UTC).
    """
    now = now or datetime.now(UTC).replace(tzinfo=None)
    result = Overview(config_path=config_path or None, generated_at=now)
    if not config_path:
        result.error = "CDC_INGEST_CONFIG is not set: point it at a pipelines YAML file"
        return result
    try:
        config = load_config(config_path)
    except Exception as exc:  # a bad file is shown, never a 500
        result.error = _message(exc)
        return result
    result.catalog = f"{config.catalog.name} at {redact(config.catalog.uri)}"
    catalog, catalog_error = _open_catalog(config.catalog)
    for pipeline in config.pipelines:
        status = PipelineStatus(
            name=pipeline.name,
            format=pipeline.format,
            landing=pipeline.landing,
            namespace=pipeline.namespace,
            dag_id=dag_id(pipeline.name),
        )
        landed = _landed(pipeline, status)
        if catalog is None:
            # Pending counts stay unknown: without the checkpoints every landed file would look new.
            status.problems.append(f"catalog unreadable: {catalog_error}")
        else:
            try:
                _read_pipeline(catalog, pipeline, status, landed, now)
            except Exception as exc:  # one pipeline's failure must not hide the others
                status.problems.append(f"catalog unreadable: {_message(exc)}")
        max_lag = pipeline.alerts.max_lag
        assess(status, max_lag.total_seconds() if max_lag is not None else None)
        result.pipelines.append(status)
    return result


def _message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _open_catalog(catalog: CatalogConfig) -> tuple[Any | None, str | None]:
    """The pyiceberg catalog, or None and why not; never creates a catalog database."""
    environ = dict(os.environ)
    try:
        environ.update(catalog_environment(catalog))
        opened = open_catalog(catalog, environ)
        opened.list_namespaces()
    except CatalogMissing as exc:
        return None, str(exc)
    except Exception as exc:
        return None, scrub(_message(exc), secret_values(catalog, environ))
    return opened, None


def _landed(pipeline: PipelineConfig, status: PipelineStatus) -> list[str] | None:
    try:
        return [f.uri for f in list_landed(pipeline.landing, file_format=pipeline.file_format)]
    except Exception as exc:
        status.problems.append(f"landing zone unreadable: {_message(exc)}")
        return None


def _read_pipeline(
    catalog: Any,
    pipeline: PipelineConfig,
    status: PipelineStatus,
    landed: list[str] | None,
    now: datetime,
) -> None:
    """Fill ``status`` from the catalog (``landed``: the landing zone's URIs, None if unlisted)."""
    namespace = pipeline.namespace
    status.namespace_exists = bool(catalog.namespace_exists(namespace))
    if not status.namespace_exists:
        status.problems.append(f"namespace {namespace} does not exist yet: no batch has run")

    def rows(table: str, fields: tuple[str, ...], where: str = "") -> list[dict[str, Any]]:
        return pipeline_rows(catalog, namespace, table, pipeline.name, fields, where) or []

    checkpoints = (
        rows(CHECKPOINTS, ("batch_id", "status", "file", "recorded_at"))
        if status.namespace_exists
        else []
    )
    state = checkpoint_state(checkpoints)
    status.checkpoint = CheckpointStatus(
        last_batch_id=state.last_committed_batch_id,
        committed_at=state.last_committed_at,
        files_applied=len(state.applied),
        duplicates=state.duplicates,
        awaiting_resume=state.pending_batch_id,
    )
    if landed is not None:
        work = pending_work(landed, state)
        status.pending_count = len(work.files)
        status.pending_files = work.files[:PENDING_LISTED]
    if not status.namespace_exists:
        return
    batches = rows(BATCHES, BATCH_FIELDS)
    _batches(batches, status, now)
    _table_rows(catalog, pipeline, status)
    if not status.tables:
        status.problems.append(f"no tables yet: no batch of {pipeline.name} wrote a table")
    _recent_records(rows, status)


def _table_rows(catalog: Any, pipeline: PipelineConfig, status: PipelineStatus) -> None:
    """Whether each table of ``status`` (and its history table) exists, and its live rows."""
    namespace = pipeline.namespace
    existing = {ident[-1] for ident in catalog.list_tables(namespace)}
    histories = pipeline.tables.history_tables([t.name for t in status.tables])
    for table in status.tables:
        table.exists = table.name in existing
        if table.exists:
            loaded = catalog.load_table((namespace, table.name))
            table.rows = _live_rows(loaded)
            debt = ReadDebt.of(loaded)
            table.data_files, table.delete_files = debt.data_files, debt.delete_files
            table.maintenance_due = debt.due(pipeline.maintenance.triggers)
        table.history = histories.get(table.name)
        if table.history is not None and table.history in existing:
            table.history_rows = _live_rows(catalog.load_table((namespace, table.history)))


def _recent_records(
    rows: Callable[[str, tuple[str, ...], str], list[dict[str, Any]]], status: PipelineStatus
) -> None:
    """The recent dead letters and DDL statements, newest first (``rows``: a table's rows)."""
    if status.last_batch is not None:
        oldest = status.last_batch.batch_id - DEAD_LETTER_BATCHES + 1
        letters = rows(
            DEAD_LETTERS,
            ("batch_id", "file", "line", "target_table", "reason", "raw", "recorded_at"),
            f"batch_id >= {oldest}",
        )
        letters.sort(key=lambda r: (-r["batch_id"], r["file"], r["line"] or 0))
        status.dead_letters = [_dead_letter(r) for r in letters[:RECENT_DEAD_LETTERS]]
    ddl = rows(
        DDL_HISTORY,
        ("batch_id", "file", "line", "target_table", "statement", "status", "detail", "event_time"),
        "",
    )
    ddl.sort(key=lambda r: (r["batch_id"], r["file"], r["line"] or 0), reverse=True)
    status.ddl_history = [
        DdlRecord(
            r["batch_id"],
            r["target_table"],
            r["statement"],
            r["status"],
            r["detail"],
            r["event_time"],
        )
        for r in ddl[:RECENT_DDL]
    ]


def _batches(rows: list[dict[str, Any]], status: PipelineStatus, now: datetime) -> None:
    """Last batch, per-table counts of the newest batch touching each table, freshness."""
    if not rows:
        return
    rows.sort(key=lambda r: (r["batch_id"], r["recorded_at"]))
    last = rows[-1]
    status.last_batch = BatchStatus(
        batch_id=last["batch_id"],
        partial=bool(last["partial"]),
        run_id=last["run_id"],
        finished_at=last["finished_at"],
        duration_s=last["duration_s"],
        files=len(last["files"] or []),
        lines=last["lines"] or 0,
        messages=last["messages"] or 0,
        dead_lettered=last["dead_lettered"] or 0,
        ddl_recorded=last["ddl_recorded"] or 0,
        inserted=last["inserted"] or 0,
        updated=last["updated"] or 0,
        deleted=last["deleted"] or 0,
    )
    status.dead_letters_total = sum(r["dead_lettered"] or 0 for r in rows if not r["partial"])
    status.history = [_point(r) for r in rows[-HISTORY:]]
    tables: dict[str, TableStatus] = {}
    for row in rows:  # oldest first: a newer batch's counts replace an older one's
        for name, counts in json.loads(row["table_counts"] or "{}").items():
            tables[name] = TableStatus(
                name=name,
                exists=False,
                batch_id=row["batch_id"],
                inserted=counts.get("inserted", 0),
                updated=counts.get("updated", 0),
                deleted=counts.get("deleted", 0),
                dead_lettered=counts.get("dead_lettered", 0),
                expectations={
                    rule: (counted["on_violation"], counted["violations"])
                    for rule, counted in (counts.get("expectations") or {}).items()
                },
            )
    status.tables = [tables[name] for name in sorted(tables)]
    newest = max((r["freshness_ms"] for r in rows if r["freshness_ms"] is not None), default=None)
    if newest is not None:
        status.freshness = datetime.fromtimestamp(newest / 1000, UTC).replace(tzinfo=None)
        status.freshness_lag_s = (now - status.freshness).total_seconds()


def _point(row: dict[str, Any]) -> BatchPoint:
    lag = None
    finished = row["finished_at"]
    if row["freshness_ms"] is not None and finished is not None:
        if finished.tzinfo is not None:
            finished = finished.astimezone(UTC).replace(tzinfo=None)
        newest = datetime.fromtimestamp(row["freshness_ms"] / 1000, UTC).replace(tzinfo=None)
        lag = max(0.0, (finished - newest).total_seconds())
    return BatchPoint(
        batch_id=row["batch_id"],
        duration_s=row["duration_s"],
        rows_applied=(row["inserted"] or 0) + (row["updated"] or 0) + (row["deleted"] or 0),
        dead_lettered=row["dead_lettered"] or 0,
        lag_s=lag,
    )


def _live_rows(table: Any) -> int | None:
    """Rows in the current snapshot: data records minus position deletes (Spark's MERGE writes
    no equality deletes; a table holding some is not counted without a scan)."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return 0
    summary = snapshot.summary
    if int(summary.get("total-equality-deletes", "0") or 0):
        return None
    records = summary.get("total-records")
    if records is None:
        return None
    return int(records) - int(summary.get("total-position-deletes", "0") or 0)


def _dead_letter(row: dict[str, Any]) -> DeadLetter:
    raw = row["raw"]
    if raw is not None and len(raw) > RAW_CHARS:
        raw = raw[:RAW_CHARS] + "…"
    return DeadLetter(
        batch_id=row["batch_id"],
        file=row["file"],
        line=row["line"],
        target_table=row["target_table"],
        reason=row["reason"],
        raw=raw,
        recorded_at=row["recorded_at"],
    )
