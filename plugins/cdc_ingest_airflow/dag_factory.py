"""One Airflow DAG per pipeline of a cdc-ingest pipelines file.

Each DAG has a single ``apply_batch`` task: the Spark provider's ``SparkSubmitOperator`` running
``jobs/ingest_job.py run --config <file> --pipeline <name>``. The job itself decides which landed
files are new, so a run is one micro-batch and at most one run per pipeline is active at a time.

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

import functools
import importlib.util
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG
from cdc_ingest.config import CatalogConfig, Config, PipelineConfig, load_config
from cdc_ingest.spark_session import catalog_conf, job_jars, session_conf

DAG_ID_PREFIX = "ingest_"
TASK_ID = "apply_batch"
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


def submit_jars(catalog: CatalogConfig) -> str:
    """Comma-separated jars for ``spark-submit --jars``; the ``cdc_ingest_jars`` template macro.

    Args:
        catalog: the pipelines file's catalog, whose database's JDBC driver must be among them.

    Raises:
        EnvironmentProblem: naming the missing jar and its Debian package; raised while the task
            renders its templates, so the task fails before spark-submit starts.
    """
    return ",".join(job_jars(catalog))


def _spark_conf(config: Config) -> dict[str, str]:
    # Later entries win, so a pipelines file's own spark.conf can override the defaults.
    return {**session_conf(), **catalog_conf(config.catalog), **config.spark.conf}


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
        A DAG ``ingest_<pipeline>`` with the single task ``apply_batch``.

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
        schedule=pipeline.schedule,
        start_date=START_DATE,
        catchup=False,
        # Two runs of one pipeline would apply the same landed files twice.
        max_active_runs=1,
        default_args={"retries": pipeline.retries, "retry_delay": RETRY_DELAY},
        tags=[TAG, pipeline.format],
        user_defined_macros={JARS_MACRO: functools.partial(submit_jars, config.catalog)},
        doc_md=_doc_md(config, pipeline, application),
    ) as dag:
        SparkSubmitOperator(
            task_id=TASK_ID,
            application=str(application),
            application_args=["run", "--config", config_path, "--pipeline", pipeline.name],
            conn_id=config.spark.conn_id,
            jars="{{ " + JARS_MACRO + "() }}",
            conf=_spark_conf(config),
            env_vars=_env_vars(application.parent),
            name=f"cdc-ingest-{pipeline.name}",
            verbose=False,
        )
    return dag


def build_dags(config_path: str | os.PathLike[str]) -> dict[str, DAG]:
    """One DAG per pipeline in a pipelines file, keyed by dag_id.

    Args:
        config_path: the pipelines YAML file.

    Returns:
        ``{"ingest_<name>": DAG}`` for every pipeline, in file order.

    Raises:
        ConfigError: if the file is missing or invalid. Deliberately not caught: raised from a DAG
            file, it becomes an Airflow import error that names the file and the reason.
        DeploymentError: if ``jobs/ingest_job.py`` cannot be located.
    """
    config = load_config(os.fspath(config_path))
    dags = [build_dag(config, pipeline) for pipeline in config.pipelines]
    return {dag.dag_id: dag for dag in dags}
