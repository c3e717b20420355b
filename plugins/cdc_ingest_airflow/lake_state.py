"""What an ingest DAG's cheap tasks read from the catalog, with pyiceberg: no JVM, no pyspark.

- :func:`has_work` (the ``check_landing`` short-circuit task): is there anything for Spark to
  do? Always for a replay, rebuild or backfill run; otherwise :func:`has_new_files` lists the
  landing zone and compares it with the pipeline's committed files in ``_cdc_checkpoints``.
- :func:`batch_summary` (the ``batch_summary`` task): the summary of the batch that this DAG run's
  ``apply_batch`` recorded in ``_cdc_batches``, returned as the task's XCom.

pyiceberg is imported when a task runs, never while the DAG file is parsed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from cdc_ingest.catalog.properties import open_catalog
from cdc_ingest.config import Config, load_config
from cdc_ingest.landing.zones import list_landed
from cdc_ingest.state.checkpoints import APPLIED, COMMITTED, DUPLICATE, PLANNED
from cdc_ingest.state.tables import BATCHES, CHECKPOINTS

from cdc_ingest_airflow.aws_connection import catalog_environment, pipeline_s3_access

log = logging.getLogger(__name__)


def _pipeline_rows(
    config: Config, namespace: str, table: str, pipeline: str, fields: tuple[str, ...]
) -> list[dict[str, Any]] | None:
    """A pipeline's rows of a system table; None if the table does not exist yet."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    environ = {**os.environ, **catalog_environment(config.catalog)}
    catalog = open_catalog(config.catalog, environ=environ)
    try:
        loaded = catalog.load_table((namespace, table))
    except (NoSuchTableError, NoSuchNamespaceError):
        return None
    # Pipeline names are [a-z0-9_]+ (checked when the config loads): safe inside quotes.
    scan = loaded.scan(row_filter=f"pipeline == '{pipeline}'", selected_fields=fields)
    rows: list[dict[str, Any]] = scan.to_arrow().to_pylist()
    return rows


def new_files(config: Config, pipeline_name: str) -> list[str] | None:
    """Landed files the pipeline has not committed; None when a planned batch awaits its commit.

    Raises:
        ConfigError: unknown pipeline.
        LandingError: the landing zone cannot be listed (or its ``aws_conn_id`` is not defined).
    """
    pipeline = config.pipeline(pipeline_name)
    landed = list_landed(pipeline.landing, pipeline_s3_access(pipeline))
    rows = _pipeline_rows(
        config, pipeline.namespace, CHECKPOINTS, pipeline.name, ("batch_id", "status", "file")
    )
    return uncommitted([f.uri for f in landed], rows or [])


def uncommitted(landed: list[str], rows: list[dict[str, Any]]) -> list[str] | None:
    """Landed URIs that no committed batch applied; None when a planned batch awaits its commit.

    Args:
        landed: the landing zone's file URIs.
        rows: the pipeline's ``_cdc_checkpoints`` rows (``batch_id``, ``status``, ``file``).
    """
    committed = {r["batch_id"] for r in rows if r["status"] == COMMITTED}
    if any(r["status"] == PLANNED and r["batch_id"] not in committed for r in rows):
        return None
    seen = {
        r["file"]
        for r in rows
        if r["batch_id"] in committed and r["status"] in (APPLIED, DUPLICATE)
    }
    return [uri for uri in landed if uri not in seen]


def has_new_files(config_path: str, pipeline_name: str) -> bool:
    """Whether ``apply_batch`` has work: new landed files, or a batch to resume.

    A file landing again under a new name counts as new here (telling needs its content hash);
    the job then records it as a duplicate without applying it.
    """
    files = new_files(load_config(config_path), pipeline_name)
    if files is None:
        log.info("pipeline %s: a planned batch awaits its commit: resuming it", pipeline_name)
        return True
    log.info("pipeline %s: %d new landed files %s", pipeline_name, len(files), files[:20])
    return bool(files)


def has_work(config_path: str, pipeline_name: str, params: Mapping[str, Any], dag_run: Any) -> bool:
    """The ``check_landing`` task: a replay, rebuild or backfill run always has work; others
    have work when :func:`has_new_files` says so."""
    run_type = getattr(dag_run, "run_type", None)
    backfill = getattr(run_type, "value", run_type) == "backfill"
    if backfill or params.get("replay_from") or params.get("replay_to"):
        log.info("pipeline %s: replaying the files landed in the run's range", pipeline_name)
        return True
    if params.get("rebuild_tables"):
        log.info("pipeline %s: rebuilding %s", pipeline_name, params["rebuild_tables"])
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
