"""What an ingest DAG's cheap tasks read from the catalog, with pyiceberg: no JVM, no pyspark.

- :func:`has_work` (the ``check_landing`` short-circuit task): is there anything for Spark to
  do? Always for a replay, rebuild or backfill run; otherwise :func:`has_new_files` lists the
  landing zone and reads ``_cdc_checkpoints`` through ``cdc_ingest.state.lake``, which the job
  and the status page read it through too.
- :func:`batch_summary` (the ``batch_summary`` task): the summary of the batch that this DAG run's
  ``apply_batch`` recorded in ``_cdc_batches``, returned as the task's XCom.
- :func:`batch_tables` (``apply_batch``'s report): what the batch committed to each table, and
  which of them it left due for maintenance.

pyiceberg is imported when a task runs, never while the DAG file is parsed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from cdc_ingest.config import Config, load_config
from cdc_ingest.landing.zones import list_landed
from cdc_ingest.read_debt import due_tables
from cdc_ingest.run.options import forces_run
from cdc_ingest.state.lake import (
    CatalogMissing,
    PendingWork,
    checkpoint_state,
    open_catalog,
    pending_work,
    pipeline_rows,
)
from cdc_ingest.state.tables import BATCHES, CHECKPOINTS

from cdc_ingest_airflow.aws_connection import catalog_environment, pipeline_s3_access

log = logging.getLogger(__name__)


def _pipeline_rows(
    config: Config, namespace: str, table: str, pipeline: str, fields: tuple[str, ...]
) -> list[dict[str, Any]] | None:
    """A pipeline's rows of a system table; None if it (or the catalog) does not exist yet."""
    environ = {**os.environ, **catalog_environment(config.catalog)}
    try:
        catalog = open_catalog(config.catalog, environ)
    except CatalogMissing:
        return None
    return pipeline_rows(catalog, namespace, table, pipeline, fields)


def pending(config: Config, pipeline_name: str) -> PendingWork:
    """What the pipeline's next run has to do: new landed files, or a planned batch to resume.

    Raises:
        ConfigError: unknown pipeline.
        LandingError: the landing zone cannot be listed (or its ``aws_conn_id`` is not defined).
    """
    pipeline = config.pipeline(pipeline_name)
    landed = list_landed(pipeline.landing, pipeline_s3_access(pipeline), pipeline.file_format)
    rows = _pipeline_rows(
        config, pipeline.namespace, CHECKPOINTS, pipeline.name, ("batch_id", "status", "file")
    )
    return pending_work([f.uri for f in landed], checkpoint_state(rows or []))


def has_new_files(config_path: str, pipeline_name: str) -> bool:
    """Whether ``apply_batch`` has work: new landed files, or a batch to resume.

    A file landing again under a new name counts as new here (telling needs its content hash);
    the job then records it as a duplicate without applying it.
    """
    work = pending(load_config(config_path), pipeline_name)
    if work.resumes_batch is not None:
        log.info(
            "pipeline %s: a planned batch awaits its commit: resuming it (batch %d)",
            pipeline_name,
            work.resumes_batch,
        )
    log.info("pipeline %s: %d new landed files %s", pipeline_name, len(work.files), work.files[:20])
    return work.any


def has_work(config_path: str, pipeline_name: str, params: Mapping[str, Any], dag_run: Any) -> bool:
    """The ``check_landing`` task: a backfill run, or a run whose Params ask for a replay or
    rebuild, always has work; others have work when :func:`has_new_files` says so."""
    run_type = getattr(dag_run, "run_type", None)
    if getattr(run_type, "value", run_type) == "backfill":
        log.info("pipeline %s: replaying the files landed in the run's range", pipeline_name)
        return True
    forcing = forces_run(params)
    if forcing:
        log.info("pipeline %s: %s asked for: always work", pipeline_name, ", ".join(forcing))
        return True
    return has_new_files(config_path, pipeline_name)


def batch_summary(
    config_path: str, pipeline_name: str, run_id: str, dry_run: bool = False
) -> dict[str, Any]:
    """The summary (``RunSummary.to_json()``) recorded in ``_cdc_batches`` by this DAG run.

    When the run recorded no row (nothing new, a dry run, or a resumed batch whose row an earlier
    run wrote) the result has ``batch_id`` None and says why in ``note``.
    """
    config = load_config(config_path)
    pipeline = config.pipeline(pipeline_name)
    rows = _pipeline_rows(
        config, pipeline.namespace, BATCHES, pipeline.name, ("run_id", "recorded_at", "summary")
    )
    mine = [r for r in rows or [] if r["run_id"] == run_id]
    if mine:
        summary: dict[str, Any] = json.loads(max(mine, key=lambda r: r["recorded_at"])["summary"])
        return summary
    note = (
        "dry run: nothing recorded, the summary is in apply_batch's log"
        if dry_run
        else "no batch recorded by this run"
    )
    return {"pipeline": pipeline.name, "batch_id": None, "dry_run": dry_run, "note": note}


def batch_tables(
    config_path: str, summary: Mapping[str, Any]
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each table the batch of ``summary`` changed, loaded once for two answers:

    - the snapshots the batch committed to it (their commits carry the batch's id:
      ``cdc.batch-id``), oldest first, with the snapshot it had before them; and for a table that
      keeps history, its history table's;
    - the tables it wrote (mirrors, their history tables) whose read debt reached the pipeline's
      ``maintenance.triggers``, each with why (:mod:`cdc_ingest.read_debt`).
    """
    batch_id = summary.get("batch_id")
    tables = sorted(summary.get("tables") or {})
    if batch_id is None or not tables:
        return {}, {}
    config = load_config(config_path)
    pipeline = config.pipeline(str(summary["pipeline"]))
    environ = {**os.environ, **catalog_environment(config.catalog)}
    catalog = open_catalog(config.catalog, environ)
    histories = pipeline.tables.history_tables(tables)
    loaded = _loaded(catalog, pipeline.namespace, [*tables, *sorted(histories.values())])
    found: dict[str, dict[str, Any]] = {}
    for name in tables:
        mine = _committed(loaded.get(name), int(batch_id))
        if name in histories:
            mine["history_table"] = histories[name]
            kept = _committed(loaded.get(histories[name]), int(batch_id))
            mine["history_snapshots"] = kept["snapshots"]
        found[name] = mine
    return found, due_tables(loaded, pipeline.maintenance.triggers)


def _loaded(catalog: Any, namespace: str, names: list[str]) -> dict[str, Any]:
    """The tables of ``names`` that exist, loaded."""
    from pyiceberg.exceptions import NoSuchTableError

    loaded = {}
    for name in names:
        try:
            loaded[name] = catalog.load_table((namespace, name))
        except NoSuchTableError:
            continue
    return loaded


def _committed(table: Any, batch_id: int) -> dict[str, Any]:
    if table is None:
        return {"snapshots": [], "previous_snapshot": None}
    ordered = sorted(table.snapshots(), key=lambda s: s.sequence_number)
    ids = [s.snapshot_id for s in ordered if s.summary.get("cdc.batch-id") == str(batch_id)]
    first = next((s for s in ordered if s.snapshot_id in ids), None)
    return {"snapshots": ids, "previous_snapshot": first.parent_snapshot_id if first else None}
