"""What the ingest and maintenance DAGs share: the spark-submit application, jars, conf, env.

Parsing a DAG file must stay cheap and must not need Spark: nothing here imports pyspark, and the
job's jars are looked up when a task is rendered on the worker (the ``cdc_ingest_jars`` macro),
not while the DAG processor parses the file.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from cdc_ingest.config import Config
from cdc_ingest.jars import artifact_paths, optional_artifacts
from cdc_ingest.jvm_archive import driver_options, hooks_class_loading
from cdc_ingest.lineage import lineage_conf
from cdc_ingest.spark_session import job_jars, submit_conf

TAG = "cdc-ingest"
JARS_MACRO = "cdc_ingest_jars"
# The driver's class archive is chosen where the task runs: the archive is that machine's, and so
# are the Java agents its environment may add (jvm_archive.hooks_class_loading).
ARCHIVE_MACRO = "cdc_ingest_class_archive"
# Fixed and in the past so that schedules are stable across parses; catchup is off, so only the
# latest interval ever runs.
START_DATE = datetime(2024, 1, 1, tzinfo=UTC)
APPLICATION_PACKAGE = "cdc_ingest.application"
APPLICATION_NAME = "ingest_job.py"


class DeploymentError(RuntimeError):
    """The installed cdc_ingest package lacks its spark-submit application."""


def application_path() -> Path:
    """Absolute path of the installed package's spark-submit application
    (``cdc_ingest/application/ingest_job.py``), found by the import system without importing it,
    so nothing of the job runs while a DAG file is parsed.

    Raises:
        DeploymentError: if the package or its application cannot be found.
    """
    spec = importlib.util.find_spec(APPLICATION_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise DeploymentError(
            f"the {APPLICATION_PACKAGE} package is not importable from this interpreter: "
            "pip install cdc-ingest"
        )
    path = Path(next(iter(spec.submodule_search_locations))).resolve() / APPLICATION_NAME
    if not path.is_file():
        raise DeploymentError(f"{path} does not exist: reinstall cdc-ingest")
    return path


def submit_jars(lineage: bool = False) -> str:
    """Comma-separated jars for ``spark-submit --jars``; the ``cdc_ingest_jars`` template macro
    (``cdc_ingest_jars(True)``: with the OpenLineage listener's).

    Raises:
        EnvironmentProblem: naming the missing artifacts and how to resolve them; raised while
            the task renders its templates, so the task fails before spark-submit starts.
    """
    return ",".join(job_jars() + (artifact_paths(optional_artifacts()) if lineage else []))


def jars_template(config: Config) -> str:
    """The ``jars`` template of a spark-submit task of ``config``'s pipelines."""
    return "{{ " + JARS_MACRO + ("(True)" if config.lineage else "()") + " }}"


def spark_conf(config: Config, lineage: bool = True) -> dict[str, str]:
    """spark-submit's conf; with ``lineage``, the pipelines file's OpenLineage settings."""
    overrides = {**(lineage_conf(config.lineage) if lineage else {}), **config.spark.conf}
    return submit_conf(overrides, class_archive=_archive_when_rendered)


def _archive_when_rendered(options: str) -> str:
    """The driver's class archive options as a template rendered on the worker, unless the
    pipelines file's own ``options`` load an agent."""
    return "" if hooks_class_loading(options, environ={}) else "{{ " + ARCHIVE_MACRO + "() }}"


def task_macros() -> dict[str, object]:
    """The macros a DAG's spark-submit tasks render on the worker."""
    return {JARS_MACRO: submit_jars, ARCHIVE_MACRO: driver_options}


def env_vars() -> dict[str, str]:
    """spark-submit's environment, which replaces the inherited variables: the caller's
    ``PYTHONPATH``, if any, is kept."""
    variables = {
        # Python workers start PYSPARK_PYTHON; without it they run the system python3, which
        # lacks pyarrow and the job's package.
        "PYSPARK_PYTHON": sys.executable,
    }
    if os.environ.get("PYTHONPATH"):
        variables["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return variables
