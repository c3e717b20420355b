"""End to end: ``airflow dags test`` spark-submits the job, which writes an Iceberg table.

This is the real stack: Airflow parses dags/cdc_ingest_dags.py, the provider's SparkSubmitOperator
runs ``spark-submit jobs/ingest_job.py`` in local mode, and pyiceberg reads the result back from
the same SQLite-backed catalog.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
JAVA_17 = Path("/usr/lib/jvm/java-17-openjdk-amd64")

LINDORM_LINES = (
    '{"schema":{},"payload":{"op":"c","ts_ms":1465491411815,"before":null,'
    '"after":{"id":"1004","first_name":"Anne","last_name":"Kretchmar"},'
    '"source":{"version":"v1.0","db":"ld-xxxx","namespace":"default","table":"customers",'
    '"ts_ms":1465491411807}}}\n'
    '{"schema":{},"payload":{"op":"u","ts_ms":1465491411815,'
    '"before":{"id":"1004","first_name":"Anne Marie","last_name":"Kretchmar"},'
    '"after":{"id":"1004","first_name":"Anne Marie"},'
    '"source":{"version":"v1.0","db":"ld-xxxx","namespace":"default","table":"customers",'
    '"ts_ms":1465491411807}}}\n'
)


def _java_home() -> str | None:
    # Spark 3.5 needs Java 17 or older; prefer the known JDK over whatever `java` resolves to.
    if JAVA_17.is_dir():
        return str(JAVA_17)
    return os.environ.get("JAVA_HOME")


def _airflow(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "airflow"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _tail(result: subprocess.CompletedProcess[str], chars: int = 6000) -> str:
    return f"exit {result.returncode}\n--- stdout ---\n{result.stdout[-chars:]}\n" + (
        f"--- stderr ---\n{result.stderr[-chars:]}"
    )


@pytest.mark.slow
def test_dags_test_applies_landed_lindorm_file(tmp_path: Path) -> None:
    java_home = _java_home()
    if java_home is None and shutil.which("java") is None:
        pytest.skip("no Java runtime for Spark")
    if not (VENV_BIN / "spark-submit").exists() or not (VENV_BIN / "airflow").exists():
        pytest.skip("spark-submit or airflow missing from the virtual environment")

    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "customers-0001.json").write_text(LINDORM_LINES, encoding="utf-8")
    catalog_uri = f"sqlite:///{tmp_path}/catalog.db"
    warehouse = f"file://{tmp_path}/warehouse"
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            catalog:
              name: lake
              uri: {catalog_uri}
              warehouse: {warehouse}
            pipelines:
              - name: customers
                format: lindorm
                landing: file://{landing}
                namespace: ods
                # Fail on the first error instead of waiting out retry delays.
                retries: 0
                keys:
                  customers: [id]
            """
        ),
        encoding="utf-8",
    )

    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "CDC_INGEST_CONFIG": str(config),
        # JSON form: the URI form spark://local[2] is parsed into --master yarn.
        "AIRFLOW_CONN_SPARK_LOCAL": '{"conn_type":"spark","host":"local[2]"}',
        # spark-submit comes from the pyspark wheel in the venv, and `airflow` must run the
        # venv's interpreter so that PYSPARK_PYTHON (sys.executable at parse time) is the venv's.
        "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
    }
    if java_home:
        env["JAVA_HOME"] = java_home
    # Started from inside another Spark process these would point spark-submit at the wrong place.
    for inherited in ("PYSPARK_SUBMIT_ARGS", "SPARK_ENV_LOADED", "SPARK_HOME"):
        env.pop(inherited, None)

    migrate = _airflow(["db", "migrate"], env, tmp_path)
    assert migrate.returncode == 0, _tail(migrate)

    run = _airflow(["dags", "test", "ingest_customers"], env, tmp_path)
    assert run.returncode == 0, _tail(run)
    output = run.stdout + run.stderr
    # Check the run's own final state too, not only the CLI's exit status.
    finished = [line for line in output.splitlines() if "DagRun Finished" in line]
    assert finished and "state=success" in finished[-1], _tail(run)
    assert "ingest_job.py run --config" in output, "the task did not spark-submit the job"

    from pyiceberg.catalog.sql import SqlCatalog

    table = SqlCatalog("lake", uri=catalog_uri, warehouse=warehouse).load_table("ods.customers")
    rows = table.scan(selected_fields=("id", "first_name", "last_name")).to_arrow().to_pylist()
    assert rows == [{"id": "1004", "first_name": "Anne Marie", "last_name": None}]
