"""One ``maintain_<pipeline>`` DAG per pipeline: Iceberg table maintenance, spark-submitted.

Its one task, ``maintain_tables``, runs the package's ``ingest_job.py maintain --config <file>
--pipeline <name>`` (see :mod:`cdc_ingest.maintenance`) through the same Spark connection, jars
and settings as the ingest DAG. It runs on the pipeline's ``maintenance.schedule`` (``@daily``
unless set) and, unless ``maintenance.triggers`` is none, whenever an ingest batch leaves a table
due for maintenance (the pipeline's maintenance asset, :mod:`cdc_ingest_airflow.assets`): Airflow's
``AssetOrTimeSchedule``. Events that arrive while it runs make one more run.

It never overlaps the ingest DAG's ``apply_batch`` of the same namespace: the job holds the
namespace's lock exclusively, ingest runs hold it shared (:mod:`cdc_ingest.state.locks`). The
lock lives with the catalog (a file lock beside the SQLite database, an advisory lock in
PostgreSQL), not in Airflow: an Airflow pool would first have to exist in the metadata database
(a task in a missing pool waits forever, and a DAG file must not touch the database while it is
parsed), and it would not hold for runs started outside Airflow. Like the ingest DAG, building
this DAG imports no pyspark.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, AssetOrTimeSchedule, CronTriggerTimetable
from cdc_ingest.config import Config, PipelineConfig
from cdc_ingest.maintenance_config import format_duration

from cdc_ingest_airflow.assets import maintenance_asset
from cdc_ingest_airflow.ingest_operator import IngestSparkSubmitOperator
from cdc_ingest_airflow.spark_job import (
    JARS_MACRO,
    START_DATE,
    TAG,
    application_path,
    env_vars,
    spark_conf,
    task_macros,
)

MAINTAIN_DAG_ID_PREFIX = "maintain_"
MAINTAIN_TASK_ID = "maintain_tables"
MAINTENANCE_TAG = "maintenance"
RETRY_DELAY = timedelta(minutes=10)
# A run a batch's maintenance event started maintains the due tables only; a scheduled or manual
# run, all of them. The flag renders empty unless the run is asset-triggered.
DUE_ARG = "{{ '--due' if dag_run.run_type == 'asset_triggered' else '' }}"


def _retain(pipeline: PipelineConfig) -> str:
    retain = pipeline.maintenance.retain_snapshots
    if isinstance(retain, int):
        return f"the last {retain} snapshots"
    return f"the snapshots of the last {format_duration(retain)}"


def _tombstones(pipeline: PipelineConfig) -> str:
    retention = pipeline.maintenance.tombstone_retention
    if retention is None:
        return ""
    return f" First it drops the tombstones older than {format_duration(retention)}."


def maintenance_schedule(pipeline: PipelineConfig) -> Any:
    """The schedule of ``maintain_<pipeline>``: its cron or preset, its maintenance asset, both
    (whichever comes first), or none."""
    cron = pipeline.maintenance.schedule
    if pipeline.maintenance.triggers is None:
        return cron
    asset = maintenance_asset(pipeline.name)
    if cron is None:
        return [asset]
    return AssetOrTimeSchedule(timetable=CronTriggerTimetable(cron, timezone="UTC"), assets=asset)


def _triggered(pipeline: PipelineConfig) -> str:
    triggers = pipeline.maintenance.triggers
    if triggers is None:
        return ""
    named = []
    if triggers.commits is not None:
        named.append(f"{triggers.commits} commits of small or delete files since its last one")
    if triggers.delete_files_per_data_file is not None:
        named.append(f"{triggers.delete_files_per_data_file:g} delete files per data file")
    if not named:
        return ""
    return f" It also runs when an ingest batch leaves a table at {' or '.join(named)}."


def build_maintenance_dag(config: Config, pipeline: PipelineConfig) -> DAG:
    """The maintenance DAG of one pipeline.

    Args:
        config: the parsed pipelines file.
        pipeline: the pipeline whose tables are maintained.

    Returns:
        A DAG ``maintain_<pipeline>`` with the one task ``maintain_tables``.

    Raises:
        DeploymentError: if the package's spark-submit application cannot be found.
    """
    application = application_path()
    config_path = str(Path(config.path).resolve())
    with DAG(
        dag_id=f"{MAINTAIN_DAG_ID_PREFIX}{pipeline.name}",
        description=(
            f"Compaction, snapshot expiry and orphan removal for the tables pipeline "
            f"{pipeline.name} writes in {config.catalog.name}.{pipeline.namespace}"
        ),
        schedule=maintenance_schedule(pipeline),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args={"retries": pipeline.retries, "retry_delay": RETRY_DELAY},
        tags=[TAG, MAINTENANCE_TAG],
        user_defined_macros=task_macros(),
        doc_md=(
            f"Runs `rewrite_data_files`, `rewrite_position_delete_files`, `expire_snapshots` "
            f"(keeping {_retain(pipeline)}) and `remove_orphan_files` (older than "
            f"{format_duration(pipeline.maintenance.orphan_older_than)}) on every table pipeline "
            f"`{pipeline.name}` writes in `{pipeline.namespace}`, holding the namespace's lock: "
            f"ingest waits for it, and it waits for ingest.{_tombstones(pipeline)}"
            f"{_triggered(pipeline)}"
        ),
    ) as dag:
        IngestSparkSubmitOperator(
            task_id=MAINTAIN_TASK_ID,
            catalog=config.catalog,
            application=str(application),
            application_args=[
                "maintain",
                "--config",
                config_path,
                "--pipeline",
                pipeline.name,
                *([DUE_ARG] if pipeline.maintenance.triggers is not None else []),
            ],
            conn_id=config.spark.conn_id,
            engine_conn_id=config.spark.engine_conn_id,
            jars="{{ " + JARS_MACRO + "() }}",
            conf=spark_conf(config, lineage=False),
            env_vars=env_vars(),
            name=f"cdc-ingest-maintain-{pipeline.name}",
            verbose=False,
        )
    return dag
