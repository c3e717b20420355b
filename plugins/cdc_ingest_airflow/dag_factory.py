"""One Airflow DAG per pipeline of a cdc-ingest pipelines file.

Each DAG runs three tasks:

- ``check_landing`` (short-circuit, no JVM): lists the landing zone and compares it with the
  files committed in ``_cdc_checkpoints`` (pyiceberg); with nothing new, the rest is skipped and
  Spark never starts.
- ``apply_batch``: the Spark provider's ``SparkSubmitOperator`` running
  the package's ``ingest_job.py run --config <file> --pipeline <name>`` plus the run's Params as
  flags. The job itself decides which landed files are new, so a run is one micro-batch and at
  most one run per pipeline is active at a time.
- ``batch_summary`` (no JVM): reads the batch's row of ``_cdc_batches`` and returns its summary
  as the task's XCom.

Params, validated in the trigger form, are the run options of ``cdc_ingest.run.options`` (their one
definition): ``tables``, ``max_files``, ``dry_run``, ``replay_from``/``replay_to`` and
``rebuild_tables``; see ``cdc_ingest.run.modes`` for what each mode does. A backfill run
(``run_type`` backfill) replays the files landed in its data interval; scheduled and manual runs
apply what is pending.

Parsing a DAG file must stay cheap and must not need Spark: nothing here imports pyspark, and the
job's jars are looked up when the task is rendered on the worker (see ``spark_job``). A machine
without the jars still lists the DAGs; the task then fails at once with the missing jar named.

Errors in the pipelines file are deliberately not swallowed: :func:`build_dags` raises the
:class:`~cdc_ingest.config.ConfigError` from :func:`~cdc_ingest.config.load_config`, whose one-line
message names the file and the offending key. Airflow records that as an import error of the DAG
file (shown in the UI and by ``airflow dags list-import-errors``) instead of quietly showing no
DAGs.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.standard.operators.python import PythonOperator, ShortCircuitOperator
from airflow.sdk import DAG, Param
from airflow.sdk.exceptions import AirflowFailException
from airflow.timetables.interval import CronDataIntervalTimetable
from cdc_ingest.alerts_config import breaches
from cdc_ingest.config import Config, ConfigError, PipelineConfig, load_config
from cdc_ingest.run.options import RUN_OPTIONS

from cdc_ingest_airflow.assets import ingest_outlets
from cdc_ingest_airflow.ingest_operator import IngestSparkSubmitOperator
from cdc_ingest_airflow.lake_state import batch_summary, has_work
from cdc_ingest_airflow.maintenance_dag import build_maintenance_dag
from cdc_ingest_airflow.spark_job import (
    START_DATE,
    TAG,
    application_path,
    env_vars,
    jars_template,
    spark_conf,
    task_macros,
)

DAG_ID_PREFIX = "ingest_"
TASK_ID = "apply_batch"
CHECK_TASK_ID = "check_landing"
SUMMARY_TASK_ID = "batch_summary"
RETRY_DELAY = timedelta(minutes=2)
log = logging.getLogger(__name__)


def timetable(schedule: str | None) -> CronDataIntervalTimetable | None:
    """The pipeline's cron schedule with data intervals (UTC).

    A bare cron string would give Airflow 3's CronTriggerTimetable, whose runs have an empty data
    interval; a backfill run replays the files landed in its interval, so it must have one: the
    run at the end of each cron period covers that period.
    """
    return None if schedule is None else CronDataIntervalTimetable(schedule, timezone="UTC")


def params() -> dict[str, Param]:
    """The Params every ingest DAG declares (validated by Airflow, shown in the trigger form),
    from the run options' one definition."""
    declared: dict[str, Param] = {}
    for option in RUN_OPTIONS:
        if option.param:
            default, schema = option.param_schema()
            declared[option.name] = Param(
                default, title=option.title, description=option.help, **schema
            )
    return declared


# The flags of ``cdc-ingest run`` that carry the Params and the run's id.
PARAM_ARGS = [option.template() for option in RUN_OPTIONS]


def report(
    config_path: str, pipeline_name: str, run_id: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``batch_summary`` task: this run's batch summary, from ``_cdc_batches``.

    Raises:
        AirflowFailException: with one line naming every threshold of the pipeline's ``alerts``
            the batch breached (the summary is logged first), so that the run fails and Airflow's
            failure notifications, callbacks and the pipeline's notifier fire.
    """
    summary = batch_summary(config_path, pipeline_name, run_id, bool(params.get("dry_run")))
    alerts = load_config(config_path).pipeline(pipeline_name).alerts
    found = breaches(summary, alerts, time.time())
    if found:
        log.info("batch summary: %s", summary)
        raise AirflowFailException(
            f"pipeline {pipeline_name} batch {summary.get('batch_id')}: " + "; ".join(found)
        )
    return summary


def alert_callbacks(pipeline: PipelineConfig) -> list[Any]:
    """The pipeline's notifier (``alerts.notifier``), for the alerting task's failure.

    Raises:
        ConfigError: when the notifier cannot be imported or built (a DAG import error naming it).
    """
    alerts = pipeline.alerts
    if alerts.notifier is None:
        return []
    module_name, _, class_name = alerts.notifier.rpartition(".")
    try:
        notifier = getattr(importlib.import_module(module_name), class_name)
        return [notifier(**alerts.notifier_args)]
    except (ImportError, AttributeError, TypeError) as exc:
        raise ConfigError(
            f"pipeline {pipeline.name!r}: alerts.notifier {alerts.notifier}: {exc}"
        ) from None


def _doc_md(config: Config, pipeline: PipelineConfig, application: Path) -> str:
    keys = ", ".join(f"{t}: {list(c)}" for t, c in pipeline.keys.items()) or "none configured"
    return (
        f"Mirrors **{pipeline.format}** CDC files landed under `{pipeline.landing}` into "
        f"`{config.catalog.name}.{pipeline.namespace}.{pipeline.table}` (keys: {keys}).\n\n"
        f"Each run spark-submits `{application}` for pipeline `{pipeline.name}` of "
        f"`{config.path}`, applying every landed file not applied yet as one batch."
    )


def build_dag(config: Config, pipeline: PipelineConfig) -> DAG:
    """The ingestion DAG of one pipeline.

    Args:
        config: the parsed pipelines file (``config.path`` is passed to the job).
        pipeline: the pipeline this DAG runs.

    Returns:
        A DAG ``ingest_<pipeline>``: ``check_landing`` >> ``apply_batch`` >> ``batch_summary``.

    Raises:
        DeploymentError: if the package's spark-submit application cannot be found.
    """
    application = application_path()
    config_path = str(Path(config.path).resolve())
    with DAG(
        dag_id=f"{DAG_ID_PREFIX}{pipeline.name}",
        description=(
            f"{pipeline.format} CDC from {pipeline.landing} into "
            f"{config.catalog.name}.{pipeline.namespace}"
        ),
        schedule=timetable(pipeline.schedule),
        start_date=START_DATE,
        catchup=False,
        # Two runs of one pipeline would apply the same landed files twice.
        max_active_runs=1,
        default_args={"retries": pipeline.retries, "retry_delay": RETRY_DELAY},
        tags=[TAG, pipeline.format],
        user_defined_macros=task_macros(),
        doc_md=_doc_md(config, pipeline, application),
        params=params(),
    ) as dag:
        where = {"config_path": config_path, "pipeline_name": pipeline.name}
        check = ShortCircuitOperator(
            task_id=CHECK_TASK_ID, python_callable=has_work, op_kwargs=where
        )
        apply = _apply_task(config, pipeline, config_path, application)
        summary = PythonOperator(
            task_id=SUMMARY_TASK_ID,
            python_callable=report,
            op_kwargs=where,
            # An alert is a finding about the batch, not a flaky task: never retried.
            retries=0,
            on_failure_callback=alert_callbacks(pipeline),
        )
        check >> apply >> summary
    return dag


def _apply_task(
    config: Config, pipeline: PipelineConfig, config_path: str, application: Path
) -> IngestSparkSubmitOperator:
    """The ``apply_batch`` task: the job, spark-submitted (or sent to a warm engine) with the
    DAG run's Params as its flags."""
    return IngestSparkSubmitOperator(
        task_id=TASK_ID,
        aws_conn_id=pipeline.aws_conn_id,
        catalog=config.catalog,
        # One asset event per table the batch changed (cdc_ingest_airflow.assets).
        config_path=config_path,
        pipeline_name=pipeline.name,
        namespace=pipeline.namespace,
        outlets=ingest_outlets(pipeline.name, pipeline.maintenance.triggers is not None),
        application=str(application),
        application_args=[
            "run",
            "--config",
            config_path,
            "--pipeline",
            pipeline.name,
            *PARAM_ARGS,
        ],
        conn_id=config.spark.conn_id,
        engine_conn_id=config.spark.engine_conn_id,
        jars=jars_template(config),
        conf=spark_conf(config),
        # The ingest task is the Spark job's OpenLineage parent run.
        openlineage_inject_parent_job_info=config.lineage is not None,
        openlineage_inject_transport_info=bool(config.lineage and not config.lineage.transport),
        env_vars=env_vars(),
        name=f"cdc-ingest-{pipeline.name}",
        verbose=False,
        # Backfill runs do not count towards the DAG's max_active_runs (Airflow 3): this
        # keeps a backfill's batch and a scheduled batch of one pipeline from overlapping.
        max_active_tis_per_dag=1,
    )


# The Spark connection a pipelines file names by default (``spark.conn_id: spark_local``).
LOCAL_SPARK_CONNECTION = "AIRFLOW_CONN_SPARK_LOCAL"


def build_dags(config_path: str | os.PathLike[str]) -> dict[str, DAG]:
    """Two DAGs per pipeline in a pipelines file, keyed by dag_id.

    Args:
        config_path: the pipelines YAML file.

    Returns:
        ``{"ingest_<name>": DAG}`` for every pipeline, in file order, then
        ``{"maintain_<name>": DAG}`` (see :mod:`cdc_ingest_airflow.maintenance_dag`).

    Raises:
        ConfigError: if the file is missing or invalid. Deliberately not caught: raised from a DAG
            file, it becomes an Airflow import error that names the file and the reason.
        DeploymentError: if the package's spark-submit application cannot be found.
    """
    # The JSON form is required: the URI form spark://local[*] is parsed into --master yarn. The
    # task process builds the DAGs too, so the default reaches the operator's connection lookup.
    os.environ.setdefault(LOCAL_SPARK_CONNECTION, '{"conn_type":"spark","host":"local[*]"}')
    config = load_config(os.fspath(config_path))
    dags = [build_dag(config, pipeline) for pipeline in config.pipelines]
    dags += [build_maintenance_dag(config, pipeline) for pipeline in config.pipelines]
    return {dag.dag_id: dag for dag in dags}
