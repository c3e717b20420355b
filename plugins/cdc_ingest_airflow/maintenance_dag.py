"""One ``maintain_<pipeline>`` DAG per pipeline: Iceberg table maintenance, spark-submitted.

Its one task, ``maintain_tables``, runs the package's ``ingest_job.py maintain --config <file>
--pipeline <name>`` (see :mod:`cdc_ingest.maintenance`) through the same Spark connection, jars
and settings as the ingest DAG. The schedule is the pipeline's ``maintenance.schedule``
(``@daily`` unless set).

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

from airflow.sdk import DAG
from cdc_ingest.config import Config, PipelineConfig
from cdc_ingest.maintenance_config import format_duration

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
        schedule=pipeline.maintenance.schedule,
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
        ),
    ) as dag:
        IngestSparkSubmitOperator(
            task_id=MAINTAIN_TASK_ID,
            catalog=config.catalog,
            application=str(application),
            application_args=["maintain", "--config", config_path, "--pipeline", pipeline.name],
            conn_id=config.spark.conn_id,
            engine_conn_id=config.spark.engine_conn_id,
            jars="{{ " + JARS_MACRO + "() }}",
            conf=spark_conf(config, lineage=False),
            env_vars=env_vars(),
            name=f"cdc-ingest-maintain-{pipeline.name}",
            verbose=False,
        )
    return dag
