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
from cdc_ingest.jars import artifact_paths
from cdc_ingest.jvm_archive import driver_options, hooks_class_loading
from cdc_ingest.lineage import OPENLINEAGE_SPARK, lineage_conf
from cdc_ingest.spark_session import job_jars, submit_conf

TAG = "cdc-ingest"
JARS_MACRO = "cdc_ingest_jars"
# The driver's class archive is chosen where the task runs: the archive is that machine's, and so
# are the Java agents its environment may add (jvm_archive.hooks_class_loading).
ARCHIVE_MACRO = "cdc_ingest_class_archive"
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


def submit_jars(lineage: bool = False) -> str:
    """Comma-separated jars for ``spark-submit --jars``; the ``cdc_ingest_jars`` template macro
    (``cdc_ingest_jars(True)``: with the OpenLineage listener's).

    Raises:
        EnvironmentProblem: naming the missing artifacts and how to resolve them; raised while
            the task renders its templates, so the task fails before spark-submit starts.
    """
    return ",".join(job_jars() + (artifact_paths([OPENLINEAGE_SPARK]) if lineage else []))


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


def env_vars(jobs: Path) -> dict[str, str]:
    # env_vars replace the inherited variables in spark-submit's environment: keep the caller's
    # PYTHONPATH entries, but put jobs/ first so cdc_ingest resolves from the tree being submitted.
    python_path = os.pathsep.join(p for p in (str(jobs), os.environ.get("PYTHONPATH", "")) if p)
    return {
        # Python workers start PYSPARK_PYTHON; without it they run the system python3, which
        # lacks pyarrow and the job's package.
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": python_path,
    }
