"""Real Airflow CLI runs for the tests: a metadata DB per test, the repo's DAG folder, spark-submit.

Shared by the end-to-end tests that go through ``airflow dags test``, ``airflow tasks clear`` and
``airflow tasks run`` (see test_airflow_dags_test.py for the first of them).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
JAVA_17 = Path("/usr/lib/jvm/java-17-openjdk-amd64")
AWS_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
)


def java_home() -> str | None:
    """Java 17 if installed (Spark 3.5 needs 17 or older), else JAVA_HOME."""
    if JAVA_17.is_dir():
        return str(JAVA_17)
    return os.environ.get("JAVA_HOME")


def require_stack() -> None:
    """Skip unless Java, spark-submit and airflow are available."""
    if java_home() is None and shutil.which("java") is None:
        pytest.skip("no Java runtime for Spark")
    if not (VENV_BIN / "spark-submit").exists() or not (VENV_BIN / "airflow").exists():
        pytest.skip("spark-submit or airflow missing from the virtual environment")


def airflow_env(home: Path, config: Path, **extra: str) -> dict[str, str]:
    """Environment for the Airflow CLI: own AIRFLOW_HOME, the repo's DAGs, no AWS variables.

    The AWS variables the suite sets for its in-process S3 tests are removed, so that an S3
    landing zone can only be reached through what the pipeline itself configures.
    """
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "CDC_INGEST_CONFIG": str(config),
        # JSON form: the URI form spark://local[2] is parsed into --master yarn.
        "AIRFLOW_CONN_SPARK_LOCAL": '{"conn_type":"spark","host":"local[2]"}',
        "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
        **extra,
    }
    home_java = java_home()
    if home_java:
        env["JAVA_HOME"] = home_java
    # Started from inside another Spark process these would point spark-submit at the wrong place.
    for inherited in ("PYSPARK_SUBMIT_ARGS", "SPARK_ENV_LOADED", "SPARK_HOME", *AWS_VARIABLES):
        env.pop(inherited, None)
    return env


def airflow(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the venv's ``airflow`` CLI to completion."""
    return subprocess.run(
        [str(VENV_BIN / "airflow"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def tail(result: subprocess.CompletedProcess[str], chars: int = 6000) -> str:
    """The end of a CLI run's output, for assertion messages."""
    return f"exit {result.returncode}\n--- stdout ---\n{result.stdout[-chars:]}\n" + (
        f"--- stderr ---\n{result.stderr[-chars:]}"
    )


def task_states(home: Path, dag_id: str | None = None) -> dict[str, dict[str, str]]:
    """Task states per DAG run, from the metadata database."""
    query = "SELECT run_id, task_id, state FROM task_instance"
    with sqlite3.connect(home / "airflow.db") as db:
        rows = (
            db.execute(query + " WHERE dag_id = ?", (dag_id,)).fetchall()
            if dag_id
            else db.execute(query).fetchall()
        )
    states: dict[str, dict[str, str]] = {}
    for run_id, task_id, state in rows:
        states.setdefault(run_id, {})[task_id] = state
    return states


# A metadata database migrated once per test process (xdist worker), copied into each test's
# AIRFLOW_HOME: ``airflow db migrate`` costs about 15 CPU-s a time, and a copy is the same
# database (no path of its home is in it).
_MIGRATED: list[Path] = []


def migrate(env: dict[str, str], cwd: Path) -> None:
    """Create the metadata database: a copy of one migrated by this process on the default
    SQLite file, or a migration of its own for any other database."""
    home = Path(env["AIRFLOW_HOME"])
    if env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"):
        done = airflow(["db", "migrate"], env, cwd)
        assert done.returncode == 0, tail(done)
        return
    if not _MIGRATED:
        import tempfile

        template = Path(tempfile.mkdtemp(prefix="airflow-migrated-"))
        done = airflow(["db", "migrate"], {**env, "AIRFLOW_HOME": str(template)}, cwd)
        assert done.returncode == 0, tail(done)
        _MIGRATED.append(template / "airflow.db")
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_MIGRATED[0], home / "airflow.db")
