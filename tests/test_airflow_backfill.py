"""End to end: ``airflow backfill create`` runs replay the files landed in each past interval,
and a DAG scheduled on a mirrored table's asset runs after a batch changes that table.

The real stack: a scheduler (LocalExecutor) and an API server (the task runner's execution API)
run the backfill's DAG runs, whose ``apply_batch`` spark-submits the job; pyiceberg reads the
tables back.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from airflow_runner import VENV_BIN, airflow, migrate, tail
from airflow_runner import java_home as find_java_home

# Its DAG tasks run on the worker's warm engine (conftest.warm_engine).
pytestmark = pytest.mark.usefixtures("warm_engine")

REPO = Path(__file__).resolve().parent.parent
DEADLINE_S = 900


def _debezium_insert(order_id: int, ts: int) -> str:
    source = {"connector": "mysql", "db": "shop", "table": "orders", "ts_ms": ts}
    change = {"op": "c", "ts_ms": ts, "before": None, "after": {"id": order_id}, "source": source}
    return json.dumps(change) + "\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _backfill_runs(airflow_home: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(airflow_home / "airflow.db") as db:
        rows = db.execute(
            "SELECT run_id, state FROM dag_run WHERE run_type = 'backfill' ORDER BY run_id"
        ).fetchall()
    return [(r[0], r[1]) for r in rows]


def _runs_of(airflow_home: Path, dag_id: str) -> list[str]:
    with sqlite3.connect(airflow_home / "airflow.db") as db:
        rows = db.execute("SELECT state FROM dag_run WHERE dag_id = ?", (dag_id,)).fetchall()
    return [r[0] for r in rows]


def _asset_events(airflow_home: Path, uri: str) -> list[dict[str, Any]]:
    with sqlite3.connect(airflow_home / "airflow.db") as db:
        rows = db.execute(
            "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE a.uri = ? ORDER BY e.id",
            (uri,),
        ).fetchall()
    return [json.loads(r[0]) for r in rows]


# Downstream DAGs, each scheduled on one mirrored table's asset (docs: the iceberg:// scheme);
# after_orders reads the versions each triggering batch placed in the history table, as
# docs/pipelines.md shows (with pyiceberg here: its task runs no JVM), and writes them to a file.
DOWNSTREAM_DAGS = """\
import json
from pathlib import Path

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Asset, task

ORDERS = Asset("iceberg://lake/ods/orders")

with DAG(
    dag_id="after_orders",
    schedule=[ORDERS],
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
):

    @task
    def changed_versions(*, triggering_asset_events=None):
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.expressions import EqualTo

        catalog = SqlCatalog("lake", uri=CATALOG_URI, warehouse=WAREHOUSE)
        for event in triggering_asset_events[ORDERS]:
            extra = event.extra
            if not extra.get("history_snapshots"):
                continue  # the batch placed nothing in the history
            history = catalog.load_table(f"ods.{extra['history_table']}")
            scan = history.scan(
                row_filter=EqualTo("_cdc_batch_id", extra["batch_id"]),
                snapshot_id=extra["history_snapshots"][-1],
                selected_fields=("id", "_cdc_op", "_cdc_current"),
            )
            rows = sorted(scan.to_arrow().to_pylist(), key=lambda r: r["id"])
            Path(OUT, f"batch_{extra['batch_id']}.json").write_text(json.dumps(rows))

    changed_versions()

with DAG(
    dag_id="after_customers",
    schedule=[Asset("iceberg://lake/ods/customers")],
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
):
    EmptyOperator(task_id="consume")
"""


def _apply_windows(airflow_home: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(airflow_home / "airflow.db") as db:
        rows = db.execute(
            "SELECT start_date, end_date FROM task_instance "
            "WHERE task_id = 'apply_batch' AND run_id LIKE 'backfill__%' ORDER BY start_date"
        ).fetchall()
    return [(r[0], r[1]) for r in rows]


@pytest.mark.slow
def test_backfill_replays_each_interval_one_batch_at_a_time(tmp_path: Path) -> None:
    """Also: the batch's asset event for ``orders`` triggers ``after_orders``, whose task reads
    the versions the batch placed in the history table, and nothing triggers
    ``after_customers`` (the batch changed no ``customers`` table)."""
    java_home = find_java_home()
    if java_home is None or not (VENV_BIN / "airflow").exists():
        pytest.skip("no Java runtime or no airflow in the virtual environment")
    landing = tmp_path / "landing"
    for day, order_id in ((20, 1), (21, 2), (22, 3)):
        (landing / f"dt=2026-11-{day}").mkdir(parents=True)
        (landing / f"dt=2026-11-{day}" / "orders.json").write_text(
            _debezium_insert(order_id, 1000 * day)
        )
    catalog_uri, warehouse = f"sqlite:///{tmp_path}/catalog.db", f"file://{tmp_path}/warehouse"
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            catalog: {{name: lake, uri: "{catalog_uri}", warehouse: "{warehouse}"}}
            pipelines:
              - name: shop
                format: debezium-json
                landing: file://{landing}
                namespace: ods
                schedule: "@daily"
                retries: 0
                keys: {{orders: [id]}}
                landed_at: {{path_pattern: "dt=%Y-%m-%d"}}
                table_options: {{orders: {{history: scd2}}}}
            """
        )
    )
    home, port = tmp_path / "airflow", _free_port()
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "cdc_ingest_dags.py").symlink_to(REPO / "dags" / "cdc_ingest_dags.py")
    read = tmp_path / "downstream"
    read.mkdir()
    (dags / "downstream.py").write_text(
        f"CATALOG_URI, WAREHOUSE = {catalog_uri!r}, {warehouse!r}\nOUT = {str(read)!r}\n"
        + DOWNSTREAM_DAGS
    )
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API_AUTH__JWT_SECRET": "test-only-secret-for-loopback",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
        "CDC_INGEST_CONFIG": str(config),
        "AIRFLOW_CONN_SPARK_LOCAL": '{"conn_type":"spark","host":"local[1]"}',
        "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]),
        "JAVA_HOME": java_home,
    }
    for inherited in ("PYSPARK_SUBMIT_ARGS", "SPARK_ENV_LOADED", "SPARK_HOME"):
        env.pop(inherited, None)
    migrate(env, tmp_path)
    # The downstream DAGs must be known (and unpaused) when the ingest run emits its events.
    assert (done := airflow(["dags", "reserialize"], env, tmp_path)).returncode == 0, tail(done)
    for downstream in ("after_orders", "after_customers"):
        done = airflow(["dags", "unpause", downstream], env, tmp_path)
        assert done.returncode == 0, tail(done)
    # A manual run applies every landed file (and stores the DAG in the metadata database).
    done = airflow(["dags", "test", "ingest_shop"], env, tmp_path)
    assert done.returncode == 0, tail(done)
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("lake", uri=catalog_uri, warehouse=warehouse)
    orders = catalog.load_table("ods.orders")
    assert sorted(r["id"] for r in orders.scan().to_arrow().to_pylist()) == [1, 2, 3]
    [event] = _asset_events(home, "iceberg://lake/ods/orders")
    # The snapshots the batch committed: the mirror's (created by it) and its history's.
    mirror_snapshots = [s.snapshot_id for s in orders.snapshots()]
    history = catalog.load_table("ods.orders_history")
    history_snapshots = [s.snapshot_id for s in history.snapshots()]
    assert event == {
        "pipeline": "shop",
        "batch_id": 1,
        "inserted": 3,
        "updated": 0,
        "deleted": 0,
        "dead_lettered": 0,
        "freshness": "1970-01-01T00:00:22+00:00",
        "snapshots": mirror_snapshots,
        "previous_snapshot": None,
        "history_table": "orders_history",
        "history_snapshots": history_snapshots,
    }
    assert len(history_snapshots) == 1 and history.scan().to_arrow().num_rows == 3
    assert _asset_events(home, "iceberg://lake/ods/customers") == []
    orders.delete("id >= 0")  # every row lost: the backfill brings back its intervals' rows
    assert orders.refresh().scan().to_arrow().num_rows == 0

    create = airflow(
        [
            "backfill",
            "create",
            "--dag-id",
            "ingest_shop",
            "--from-date",
            "2026-11-20",
            "--to-date",
            "2026-11-21",
            "--max-active-runs",
            "2",
        ],
        env,
        tmp_path,
    )
    assert create.returncode == 0, tail(create)
    # The scheduler runs no run of a paused DAG, backfills included; unpaused, it also keeps the
    # schedule running (its runs apply what is pending: nothing new here).
    unpause = airflow(["dags", "unpause", "ingest_shop"], env, tmp_path)
    assert unpause.returncode == 0, tail(unpause)
    logs: list[Any] = []
    servers: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> None:
        logs.append(open(tmp_path / f"{args[0]}.log", "w"))  # noqa: SIM115
        servers.append(
            subprocess.Popen(
                [str(VENV_BIN / "airflow"), *args],
                env=env,
                cwd=tmp_path,
                stdout=logs[-1],
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    try:
        # Task runners report to the API server: it must answer before the scheduler starts.
        start("api-server", "--port", str(port))
        deadline = time.monotonic() + DEADLINE_S
        while not _answers(f"http://127.0.0.1:{port}/api/v2/monitor/health"):
            assert time.monotonic() < deadline and servers[0].poll() is None, "no API server"
            time.sleep(1)
        start("scheduler")
        runs = _backfill_runs(home)
        while time.monotonic() < deadline:
            runs = _backfill_runs(home)
            finished = all(state in ("success", "failed") for _, state in runs)
            if len(runs) == 2 and finished and "success" in _runs_of(home, "after_orders"):
                break
            time.sleep(2)  # polling the metadata database until the runs finish
    finally:
        for server in servers:
            os.killpg(server.pid, signal.SIGTERM)
        for server in servers:
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                # The scheduler's SIGTERM handler exits by raising SystemExit wherever the signal
                # lands; raised inside a garbage-collection callback it is ignored ("Exception
                # ignored in: <function _collection_gced>") and the scheduler runs on.
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=60)
        for log in logs:
            log.close()
    scheduler_log = (tmp_path / "scheduler.log").read_text()[-4000:]
    assert [state for _, state in runs] == ["success", "success"], (runs, scheduler_log)
    assert "success" in _runs_of(home, "after_orders"), scheduler_log
    assert _runs_of(home, "after_customers") == []
    # The downstream task read the versions batch 1 placed, at the event's history snapshot.
    assert json.loads((read / "batch_1.json").read_text()) == [
        {"id": 1, "_cdc_op": "insert", "_cdc_current": True},
        {"id": 2, "_cdc_op": "insert", "_cdc_current": True},
        {"id": 3, "_cdc_op": "insert", "_cdc_current": True},
    ]

    # Each run replayed its own day's file: the two days' rows are back, the 22nd's is not.
    rows = catalog.load_table("ods.orders").scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == [1, 2]
    batches = catalog.load_table("ods._cdc_batches").scan().to_arrow().to_pylist()
    replays: dict[str, Any] = {
        r["run_id"]: json.loads(r["summary"]) for r in batches if r["run_id"].startswith("backfill")
    }
    assert sorted(s["files"][0].rsplit("/", 2)[1] for s in replays.values()) == [
        "dt%3D2026-11-20",
        "dt%3D2026-11-21",
    ]
    for summary in replays.values():
        assert summary["replay"]["mode"] == "replay" and len(summary["files"]) == 1
        day = summary["files"][0].rsplit("/", 2)[1][-10:]
        assert summary["replay"]["from"] == f"{day}T00:00:00+00:00"
    # Two backfill runs were active at once, but their batches did not overlap.
    (_, first_end), (second_start, _) = _apply_windows(home)
    assert first_end <= second_start

    # The rebuild_tables Param (here as run conf) drops the table and re-ingests every file.
    rebuild = airflow(
        ["dags", "test", "ingest_shop", "-c", json.dumps({"rebuild_tables": ["orders"]})],
        env,
        tmp_path,
    )
    assert rebuild.returncode == 0, tail(rebuild)
    rows = catalog.load_table("ods.orders").scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == [1, 2, 3]
    # The history already held every re-applied change (and every replayed one): no version
    # doubled, each still of batch 1.
    versions = catalog.load_table("ods.orders_history").scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["_cdc_batch_id"]) for r in versions) == [(1, 1), (2, 1), (3, 1)]
