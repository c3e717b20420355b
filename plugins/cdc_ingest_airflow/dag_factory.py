"""One Airflow DAG per pipeline of a cdc-ingest pipelines file.

Each DAG runs three tasks:

- ``check_landing`` (short-circuit, no JVM): lists the landing zone and compares it with the
  files committed in ``_cdc_checkpoints`` (pyiceberg); with nothing new, the rest is skipped and
  Spark never starts.
- ``apply_batch``: the Spark provider's ``SparkSubmitOperator`` running
  ``jobs/ingest_job.py run --config <file> --pipeline <name>`` plus the run's Params as flags. The
  job itself decides which landed files are new, so a run is one micro-batch and at most one run
  per pipeline is active at a time.
- ``batch_summary`` (no JVM): reads the batch's row of ``_cdc_batches`` and returns its summary
  as the task's XCom.

Params, validated in the trigger form: ``tables`` (apply only these tables), ``dry_run`` (decode
and report, write nothing), ``max_files`` (cap the files planned), ``replay_from``/``replay_to``
(re-apply the files landed in a range), ``rebuild_tables``; see ``cdc_ingest.run.options`` and
``cdc_ingest.run.modes``. A backfill run (``run_type`` backfill) replays the files landed in its
data interval; scheduled and manual runs apply what is pending.

Parsing a DAG file must stay cheap and must not need Spark: nothing here imports pyspark, and the
job's jars are looked up when the task is rendered on the worker (the ``cdc_ingest_jars`` macro),
not while the DAG processor parses the file. A machine without the jars still lists the DAGs; the
task then fails at once with the missing jar named.

Errors in the pipelines file are deliberately not swallowed: :func:`build_dags` raises the
:class:`~cdc_ingest.config.ConfigError` from :func:`~cdc_ingest.config.load_config`, whose one-line
message names the file and the offending key. Airflow records that as an import error of the DAG
file (shown in the UI and by ``airflow dags list-import-errors``) instead of quietly showing no
DAGs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.providers.standard.operators.python import PythonOperator, ShortCircuitOperator
from airflow.sdk import DAG, Param
from airflow.timetables.interval import CronDataIntervalTimetable
from cdc_ingest.config import Config, PipelineConfig, load_config
from cdc_ingest.spark_session import job_jars, submit_conf

from cdc_ingest_airflow.aws_connection import IngestSparkSubmitOperator
from cdc_ingest_airflow.lake_state import batch_summary, has_work

DAG_ID_PREFIX = "ingest_"
TASK_ID = "apply_batch"
CHECK_TASK_ID = "check_landing"
SUMMARY_TASK_ID = "batch_summary"
TAG = "cdc-ingest"
JARS_MACRO = "cdc_ingest_jars"
RETRY_DELAY = timedelta(minutes=2)
# Fixed and in the past so that schedules are stable across parses; catchup is off, so only the
# latest interval ever runs.
START_DATE = datetime(2024, 1, 1, tzinfo=UTC)
APPLICATION_NAME = "ingest_job.py"


class DeploymentError(RuntimeError):
    """The cdc_ingest package is installed without the spark-submit application beside it."""


def jobs_dir() -> Path:
    """The ``jobs/`` directory: the parent of the installed ``cdc_ingest`` package.

    Uses the import system's spec rather than importing the package, so nothing of the job is
    executed while a DAG file is parsed.

    Raises:
        DeploymentError: if ``cdc_ingest`` cannot be found.
    """
    spec = importlib.util.find_spec("cdc_ingest")
    if spec is None:
        raise DeploymentError("the cdc_ingest package is not importable from this interpreter")
    if spec.submodule_search_locations:
        package_dir = Path(next(iter(spec.submodule_search_locations)))
    elif spec.origin:
        package_dir = Path(spec.origin).parent
    else:
        raise DeploymentError(f"cannot tell where the cdc_ingest package lives (spec {spec!r})")
    return package_dir.resolve().parent


def application_path() -> Path:
    """Absolute path of ``jobs/ingest_job.py``, the application handed to spark-submit.

    Raises:
        DeploymentError: if the package was installed as a wheel without the ``jobs/`` tree.
    """
    path = jobs_dir() / APPLICATION_NAME
    if not path.is_file():
        raise DeploymentError(
            f"{path} does not exist: install cdc-ingest from its source tree "
            "(pip install -e .) so that jobs/ingest_job.py sits next to the cdc_ingest package"
        )
    return path


def submit_jars() -> str:
    """Comma-separated jars for ``spark-submit --jars``; the ``cdc_ingest_jars`` template macro.

    Raises:
        EnvironmentProblem: naming the missing artifacts and how to resolve them; raised while
            the task renders its templates, so the task fails before spark-submit starts.
    """
    return ",".join(job_jars())


def _spark_conf(config: Config) -> dict[str, str]:
    return submit_conf(config.spark.conf)


def _env_vars(jobs: Path) -> dict[str, str]:
    # env_vars replace the inherited variables in spark-submit's environment: keep the caller's
    # PYTHONPATH entries, but put jobs/ first so cdc_ingest resolves from the tree being submitted.
    python_path = os.pathsep.join(p for p in (str(jobs), os.environ.get("PYTHONPATH", "")) if p)
    return {
        # Python workers start PYSPARK_PYTHON; without it they run the system python3, which
        # lacks pyarrow and the job's package.
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": python_path,
    }


def timetable(schedule: str | None) -> CronDataIntervalTimetable | None:
    """The pipeline's cron schedule with data intervals (UTC).

    A bare cron string would give Airflow 3's CronTriggerTimetable, whose runs have an empty data
    interval; a backfill run replays the files landed in its interval, so it must have one: the
    run at the end of each cron period covers that period.
    """
    return None if schedule is None else CronDataIntervalTimetable(schedule, timezone="UTC")


def params() -> dict[str, Param]:
    """The Params every ingest DAG declares (validated by Airflow, shown in the trigger form)."""
    return {
        "tables": Param(
            [],
            type="array",
            items={"type": "string", "pattern": "^[A-Za-z0-9_]+$"},
            uniqueItems=True,
            title="Tables",
            description=(
                "Apply only these target tables (empty: all). The batch's files stay pending, "
                "and the next full run applies them to every table."
            ),
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Decode and report; write no table, dead letter or checkpoint.",
        ),
        "max_files": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Max files",
            description="Plan at most this many new files, oldest first (empty: all).",
        ),
        "replay_from": Param(
            None,
            type=["null", "string"],
            pattern=INSTANT_PATTERN,
            title="Replay from",
            description=(
                "Re-apply the already-applied files that landed at or after this UTC date or "
                "date-time (e.g. 2026-11-20 or 2026-11-20T06:00:00Z; landing time as the "
                "pipeline's landed_at says). Harmless to the tables; empty: no replay."
            ),
        ),
        "replay_to": Param(
            None,
            type=["null", "string"],
            pattern=INSTANT_PATTERN,
            title="Replay to",
            description="Replay the files that landed before this UTC date or date-time.",
        ),
        "rebuild_tables": Param(
            [],
            type="array",
            items={"type": "string", "pattern": "^[A-Za-z0-9_]+$"},
            uniqueItems=True,
            title="Rebuild tables",
            description=(
                "Drop these tables of the pipeline and rebuild them from every applied file "
                "still landed (not with a replay range)."
            ),
        ),
    }


# An ISO 8601 date or date-time (optional seconds, fraction and zone): what the job accepts.
INSTANT_PATTERN = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$"


# The flags of ``cdc-ingest run`` that carry the Params; empty values mean "not set".
PARAM_ARGS = [
    "--tables={{ params.tables | join(',') }}",
    "--max-files={{ params.max_files if params.max_files is not none else '' }}",
    "--dry-run={{ 'true' if params.dry_run else 'false' }}",
    "--run-id={{ run_id }}",
    # A backfill run replays the files that landed in its data interval; other runs replay only
    # when the Params ask.
    "--replay-from={{ data_interval_start.isoformat() if dag_run.run_type == 'backfill' "
    "else (params.replay_from or '') }}",
    "--replay-to={{ data_interval_end.isoformat() if dag_run.run_type == 'backfill' "
    "else (params.replay_to or '') }}",
    "--rebuild-tables={{ '' if dag_run.run_type == 'backfill' "
    "else params.rebuild_tables | join(',') }}",
]


def report(
    config_path: str, pipeline_name: str, run_id: str, params: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``batch_summary`` task: this run's batch summary, from ``_cdc_batches``."""
    return batch_summary(config_path, pipeline_name, run_id, bool(params.get("dry_run")))


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
        DeploymentError: if ``jobs/ingest_job.py`` cannot be located.
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
        user_defined_macros={JARS_MACRO: submit_jars},
        doc_md=_doc_md(config, pipeline, application),
        params=params(),
    ) as dag:
        where = {"config_path": config_path, "pipeline_name": pipeline.name}
        check = ShortCircuitOperator(
            task_id=CHECK_TASK_ID, python_callable=has_work, op_kwargs=where
        )
        apply = IngestSparkSubmitOperator(
            task_id=TASK_ID,
            aws_conn_id=pipeline.aws_conn_id,
            catalog=config.catalog,
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
            jars="{{ " + JARS_MACRO + "() }}",
            conf=_spark_conf(config),
            env_vars=_env_vars(application.parent),
            name=f"cdc-ingest-{pipeline.name}",
            verbose=False,
            # Backfill runs do not count towards the DAG's max_active_runs (Airflow 3): this
            # keeps a backfill's batch and a scheduled batch of one pipeline from overlapping.
            max_active_tis_per_dag=1,
        )
        summary = PythonOperator(task_id=SUMMARY_TASK_ID, python_callable=report, op_kwargs=where)
        check >> apply >> summary
    return dag


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
        DeploymentError: if ``jobs/ingest_job.py`` cannot be located.
    """
    # Imported here: the maintenance module builds on this one's helpers.
    from cdc_ingest_airflow.maintenance_dag import build_maintenance_dag

    config = load_config(os.fspath(config_path))
    dags = [build_dag(config, pipeline) for pipeline in config.pipelines]
    dags += [build_maintenance_dag(config, pipeline) for pipeline in config.pipelines]
    return {dag.dag_id: dag for dag in dags}
