"""The ``_cdc_batches`` table: one row per batch, what it read, what it did and how long it took.

A batch's row is appended after its tables, dead letters and DDL history and before its checkpoint
commit. A run killed before the row was written writes it when the batch is resumed, with the counts
of the attempt that changed each table (kept on the tables' commits, see ``commit_notes``); a run
killed between the row and the checkpoint finds the row on resume and does not write a second one.

Runs restricted to some tables (``--tables``) leave their files pending: they write a row marked
``partial`` each time they run, and the full batch that later commits those files writes its own.
Dry runs write nothing.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cdc_ingest.sql_text import literal
from cdc_ingest.state.summary import RunSummary
from cdc_ingest.state.tables import BATCHES, SYSTEM_TABLES, qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.writers.protocol import TableWriter


def _timestamp(iso: str | None) -> datetime | None:
    if iso is None:
        return None
    return datetime.fromisoformat(iso).astimezone(UTC).replace(tzinfo=None)


def batch_row(summary: RunSummary, run_id: str | None) -> dict[str, Any]:
    """The ``_cdc_batches`` row of a run summary (a batch that was not a dry run)."""
    tables = summary.tables.values()
    freshness = None
    if summary.freshness_ms is not None:
        freshness = datetime.fromtimestamp(summary.freshness_ms / 1000, UTC).replace(tzinfo=None)
    return {
        "pipeline": summary.pipeline,
        "batch_id": summary.batch_id,
        "partial": summary.partial,
        "only_tables": list(summary.only_tables),
        "resumed": summary.resumed,
        "run_id": run_id,
        "started_at": _timestamp(summary.started_at),
        "finished_at": _timestamp(summary.finished_at),
        "duration_s": summary.duration_s,
        "phase_seconds": json.dumps(summary.phase_seconds, sort_keys=True),
        "files": list(summary.files),
        "duplicate_files": len(summary.duplicate_files),
        "kafka_offsets": json.dumps(summary.kafka_offsets),
        "lines": summary.lines,
        "records": summary.records,
        "messages": summary.messages,
        "dead_lettered": summary.dead_lettered,
        "no_row_change": summary.no_row_change,
        "ddl_recorded": summary.ddl_recorded,
        "inserted": sum(t.inserted for t in tables),
        "updated": sum(t.updated for t in tables),
        "deleted": sum(t.deleted for t in tables),
        "table_counts": json.dumps(
            {name: asdict(t) for name, t in summary.tables.items()}, sort_keys=True
        ),
        "freshness_ms": summary.freshness_ms,
        "freshness": freshness,
        "summary": summary.to_json(),
        "recorded_at": datetime.now(UTC).replace(tzinfo=None),
    }


def record_batch(
    spark: SparkSession,
    catalog: str,
    namespace: str,
    summary: RunSummary,
    run_id: str | None,
    writer: TableWriter,
) -> bool:
    """Append the batch's row unless a resumed batch already wrote it; returns whether it wrote.

    Args:
        spark: the session.
        catalog: the catalog.
        namespace: the pipeline's namespace.
        summary: the finished run (``batch_id`` set, not a dry run).
        run_id: the orchestrator's run id (Airflow's ``run_id``), if any.
        writer: what appends the row (``writers``: pyiceberg's, where it can, makes no Spark
            job for one row).
    """
    from pyspark.sql import functions as F

    table = qualified(catalog, namespace, BATCHES)
    if summary.resumed and not summary.partial:
        mine = (
            (F.col("pipeline") == summary.pipeline)
            & (F.col("batch_id") == summary.batch_id)
            & ~F.col("partial")
        )
        if spark.table(table).where(mine).limit(1).count():
            return False
    row = batch_row(summary, run_id)
    properties = {"cdc.pipeline": summary.pipeline, "cdc.batch-id": str(summary.batch_id)}
    writer.append_rows(table, [row], SYSTEM_TABLES[BATCHES], properties)
    return True


def written_tables(
    spark: SparkSession, identifier: str, pipeline: str | None = None
) -> dict[str, set[str]]:
    """Per pipeline (or only ``pipeline``), the target tables its batches recorded in
    ``_cdc_batches`` (``identifier``) as having written: one query."""
    where = f" WHERE pipeline = {literal(pipeline)}" if pipeline is not None else ""
    rows = spark.sql(
        "SELECT DISTINCT pipeline, target FROM (SELECT pipeline, "
        f"explode(json_object_keys(table_counts)) AS target FROM {identifier}{where})"
    ).collect()
    tables: dict[str, set[str]] = {}
    for row in rows:
        tables.setdefault(row["pipeline"], set()).add(row["target"])
    return tables
