"""End to end: ``airflow dags test`` spark-submits the job, which writes an Iceberg table.

This is the real stack: Airflow parses dags/cdc_ingest_dags.py, the provider's SparkSubmitOperator
runs ``spark-submit jobs/ingest_job.py`` in local mode, and pyiceberg reads the result back from
the same SQLite-backed catalog.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest
from airflow_runner import REPO, VENV_BIN, airflow, java_home, migrate, tail

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


ALERT_NOTIFIER = """\
from pathlib import Path

from airflow.sdk import BaseNotifier


class FileNotifier(BaseNotifier):
    template_fields = ("path",)

    def __init__(self, path):
        super().__init__()
        self.path = path

    def notify(self, context):
        Path(self.path).write_text(str(context["exception"]))
"""


def _task_states(airflow_home: Path) -> dict[str, dict[str, str]]:
    """Task states per DAG run, from the metadata database ``airflow dags test`` wrote."""
    with sqlite3.connect(airflow_home / "airflow.db") as db:
        rows = db.execute("SELECT run_id, task_id, state FROM task_instance").fetchall()
    states: dict[str, dict[str, str]] = {}
    for run_id, task_id, state in rows:
        states.setdefault(run_id, {})[task_id] = state
    return states


def _return_value(airflow_home: Path, task_id: str) -> list[Any]:
    """Every XCom ``return_value`` of a task, decoded."""
    with sqlite3.connect(airflow_home / "airflow.db") as db:
        rows = db.execute(
            "SELECT value FROM xcom WHERE task_id = ? AND key = 'return_value'", (task_id,)
        ).fetchall()
    values = []
    for (raw,) in rows:
        value = json.loads(raw)
        values.append(json.loads(value) if isinstance(value, str) else value)
    return values


@pytest.mark.slow
def test_dags_test_applies_landed_lindorm_file(tmp_path: Path) -> None:
    home_java = java_home()
    if home_java is None and shutil.which("java") is None:
        pytest.skip("no Java runtime for Spark")
    if not (VENV_BIN / "spark-submit").exists() or not (VENV_BIN / "airflow").exists():
        pytest.skip("spark-submit or airflow missing from the virtual environment")

    landing = tmp_path / "landing"
    landing.mkdir()
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
                alerts:
                  dead_letters: true
                  notifier: alert_notifier.FileNotifier
                  notifier_args: {{path: "{tmp_path / "alert.txt"}"}}
            """
        ),
        encoding="utf-8",
    )
    # A real Airflow notifier, importable by the DAG processor and the task (PYTHONPATH below).
    (tmp_path / "alert_notifier.py").write_text(ALERT_NOTIFIER, encoding="utf-8")

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
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p
        ),
    }
    if home_java:
        env["JAVA_HOME"] = home_java
    # Started from inside another Spark process these would point spark-submit at the wrong place.
    for inherited in ("PYSPARK_SUBMIT_ARGS", "SPARK_ENV_LOADED", "SPARK_HOME"):
        env.pop(inherited, None)

    migrate(env, tmp_path)

    # Nothing landed yet: the short-circuit skips Spark entirely.
    idle = airflow(["dags", "test", "ingest_customers"], env, tmp_path)
    assert idle.returncode == 0, tail(idle)
    assert "ingest_job.py run --config" not in idle.stdout + idle.stderr, tail(idle)
    [idle_states] = _task_states(tmp_path / "airflow").values()
    assert idle_states == {
        "check_landing": "success",
        "apply_batch": "skipped",
        "batch_summary": "skipped",
    }

    (landing / "customers-0001.json").write_text(LINDORM_LINES, encoding="utf-8")
    run = airflow(["dags", "test", "ingest_customers"], env, tmp_path)
    assert run.returncode == 0, tail(run)
    output = run.stdout + run.stderr
    # Check the run's own final state too, not only the CLI's exit status.
    finished = [line for line in output.splitlines() if "DagRun Finished" in line]
    assert finished and "state=success" in finished[-1], tail(run)
    assert "ingest_job.py run --config" in output, "the task did not spark-submit the job"

    from pyiceberg.catalog.sql import SqlCatalog

    table = SqlCatalog("lake", uri=catalog_uri, warehouse=warehouse).load_table("ods.customers")
    rows = table.scan(selected_fields=("id", "first_name", "last_name")).to_arrow().to_pylist()
    assert rows == [{"id": "1004", "first_name": "Anne Marie", "last_name": None}]

    states = _task_states(tmp_path / "airflow")
    assert sorted(sorted(s.values()) for s in states.values()) == [
        ["skipped", "skipped", "success"],
        ["success", "success", "success"],
    ]
    # The batch_summary task returns the summary the job recorded in _cdc_batches.
    [summary] = _return_value(tmp_path / "airflow", "batch_summary")
    assert summary["pipeline"] == "customers" and summary["batch_id"] == 1
    assert summary["files"] == [(landing / "customers-0001.json").as_uri()]
    assert (summary["lines"], summary["messages"], summary["dead_lettered"]) == (2, 2, 0)
    assert summary["tables"]["customers"]["inserted"] == 1
    batches = SqlCatalog("lake", uri=catalog_uri, warehouse=warehouse).load_table(
        "ods._cdc_batches"
    )
    [row] = batches.scan().to_arrow().to_pylist()
    assert json.loads(row["summary"]) == summary
    assert row["run_id"] in states and states[row["run_id"]]["apply_batch"] == "success"

    # A batch with a dead letter breaches the pipeline's alerts: the data is applied, the run's
    # last task fails with one line saying why, and the pipeline's notifier hears of it.
    (landing / "customers-0002.json").write_text(
        LINDORM_LINES.splitlines()[0].replace("1004", "1005") + "\nnot json\n", encoding="utf-8"
    )
    alerted = airflow(["dags", "test", "ingest_customers"], env, tmp_path)
    output = alerted.stdout + alerted.stderr
    finished = [line for line in output.splitlines() if "DagRun Finished" in line]
    assert finished and "state=failed" in finished[-1], tail(alerted)
    reason = "pipeline customers batch 2: 1 dead letters (see _cdc_dead_letters)"
    assert reason in output, tail(alerted)
    assert (tmp_path / "alert.txt").read_text(encoding="utf-8") == reason
    [third] = [s for r, s in _task_states(tmp_path / "airflow").items() if r not in states]
    assert third == {
        "check_landing": "success",
        "apply_batch": "success",
        "batch_summary": "failed",
    }
    ids = table.refresh().scan(selected_fields=("id",)).to_arrow().to_pylist()
    assert sorted(r["id"] for r in ids) == ["1004", "1005"]
