"""`make demo`: land sample dumps per format, run each pipeline's Airflow DAG, show the result.

Everything runs on the embedded default: local Spark, an Iceberg JDBC catalog on SQLite and a local
warehouse under ./demo. A warm engine (docs/engine.md) and a real Airflow scheduler (LocalExecutor)
start; every ingest DAG is unpaused at once and sends its batch to the engine (one progress line
as each run ends; Airflow's and Spark's logs go to demo/logs/ and demo/airflow/logs/). A
downstream DAG scheduled on one mirrored table's asset runs when that table's ingest changes it.
Re-running the demo starts from scratch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from scripts.demo.pipelines import DOWNSTREAM_TABLE, PIPELINES
from scripts.demo.report import report

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "demo"
LOGS = DEMO / "logs"
FIXTURES = REPO / "tests" / "fixtures"
AIRFLOW = str(Path(sys.executable).parent / "airflow")
DOWNSTREAM_DEADLINE_S = 240
INGEST_DEADLINE_S = 900
DOWNSTREAM_DAG = '''\
"""Runs when the demo's ingest changes {uri}: writes what the event says."""
from pathlib import Path

from airflow.sdk import DAG, Asset, task

ORDERS = Asset("{uri}")

with DAG("after_orders", schedule=[ORDERS], catchup=False, tags=["cdc-ingest-demo"]):

    @task
    def report_change(triggering_asset_events=None):
        lines = [
            f"{{e.asset.uri}}: batch {{e.extra['batch_id']}} of {{e.extra['pipeline']}} inserted "
            f"{{e.extra['inserted']}}, updated {{e.extra['updated']}}, deleted "
            f"{{e.extra['deleted']}}; source events up to {{e.extra['freshness']}}"
            for events in (triggering_asset_events or {{}}).values()
            for e in events
        ]
        # An event reached through the ingest's asset alias is listed under both.
        Path("{out}").write_text("\\n".join(dict.fromkeys(lines)) + "\\n")

    report_change()
'''


def land() -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Write the landing zones and the pipelines file; returns the catalog and the pipelines."""
    pipelines: list[dict[str, Any]] = []
    for spec in PIPELINES:
        landing = DEMO / "landing" / spec["name"]
        landing.mkdir(parents=True)
        for i, entry in enumerate(spec["files"], start=1):
            # "file#2-3" lands lines 2 to 3 of a fixture only.
            name, _, span = entry.partition("#")
            lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines(keepends=True)
            first, _, last = span.partition("-")
            chosen = lines[int(first) - 1 : int(last)] if span else lines
            (landing / f"{i:04d}-{Path(name).stem}.jsonl").write_text("".join(chosen))
        pipeline = {k: v for k, v in spec.items() if k != "files"}
        pipeline.update(
            landing=landing.as_uri(), namespace="ods_" + spec["name"], schedule="*/5 * * * *"
        )
        pipelines.append(pipeline)
    catalog = {
        "name": "lake",
        "uri": f"sqlite:///{DEMO / 'catalog.db'}",
        "warehouse": (DEMO / "warehouse").as_uri(),
    }
    config = {"catalog": catalog, "pipelines": pipelines}
    (DEMO / "pipelines.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return catalog, pipelines


def airflow(args: list[str], env: dict[str, str], log: str) -> int:
    """Run the Airflow CLI with its output in demo/logs/<log>.log; returns its exit status."""
    with (LOGS / f"{log}.log").open("a") as out:
        return subprocess.run([AIRFLOW, *args], env=env, stdout=out, stderr=out).returncode


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def services(env: dict[str, str]) -> Iterator[bool]:
    """A real API server and scheduler (LocalExecutor) for the block; whether they came up."""
    processes = []
    health = f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}/api/v2/monitor/health"
    try:
        up = True
        for args in (["api-server", "--port", env["AIRFLOW__API__PORT"]], ["scheduler"]):
            out = (LOGS / f"{args[0]}.log").open("w")
            processes.append(
                subprocess.Popen(
                    [AIRFLOW, *args], env=env, stdout=out, stderr=out, start_new_session=True
                )
            )
            # Task runners report to the API server: it must answer before the scheduler starts.
            if args[0] == "api-server" and not wait_for(lambda: answers(health), 90):
                up = False
                break
        yield up
    finally:
        # The scheduler first (the API server answers its tasks while they wind down); a task
        # a later schedule started is not waited for.
        for process in reversed(processes):
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)


def run_ingest_dags(env: dict[str, str], pipelines: list[dict[str, Any]]) -> list[str]:
    """Unpause every ingest DAG: the scheduler runs them all at once, each sending its batch to
    the engine. A line of progress as each run ends; the DAGs whose run failed."""
    dag_ids = [f"ingest_{p['name']}" for p in pipelines]
    airflow(["dags", "unpause", "--treat-dag-id-as-regex", "-y", "^ingest_"], env, "setup")
    reported: dict[str, str] = {}

    def report_finished() -> bool:
        for dag_id, state, seconds in finished_runs():
            if dag_id in dag_ids and dag_id not in reported:
                reported[dag_id] = state
                print(
                    f"[{len(reported):2d}/{len(dag_ids)}] {dag_id:<32} "
                    f"{'ok' if state == 'success' else 'FAILED'} ({seconds:.0f} s)",
                    flush=True,
                )
        return len(reported) == len(dag_ids)

    if not wait_for(report_finished, INGEST_DEADLINE_S):
        print(f"not finished in {INGEST_DEADLINE_S} s: {sorted(set(dag_ids) - set(reported))}")
        return sorted(set(dag_ids) - set(reported))
    return sorted(d for d, state in reported.items() if state != "success")


def finished_runs() -> list[tuple[str, str, float]]:
    """(dag_id, state, seconds from start to end) of every finished DAG run."""
    with sqlite3.connect(DEMO / "airflow" / "airflow.db") as db:
        rows = db.execute(
            "SELECT dag_id, state, (julianday(end_date) - julianday(start_date)) * 86400 "
            "FROM dag_run WHERE state IN ('success', 'failed') ORDER BY end_date"
        ).fetchall()
    return [(d, s, float(t or 0)) for d, s, t in rows]


def wait_for(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(2)  # a demo polls; the tests wait on the metadata database the same way
    return False


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def runs_of(dag_id: str) -> list[str]:
    with sqlite3.connect(DEMO / "airflow" / "airflow.db") as db:
        rows = db.execute("SELECT state FROM dag_run WHERE dag_id = ?", (dag_id,)).fetchall()
    return [r[0] for r in rows]


def demo_env(dags: Path) -> dict[str, str]:
    """Airflow's environment: the demo's home and DAGs, a LocalExecutor reporting to a loopback
    API server (for the downstream DAG's scheduler)."""
    port = str(free_port())
    return {
        **os.environ,
        "AIRFLOW_HOME": str(DEMO / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__PORT": port,
        "AIRFLOW__API_AUTH__JWT_SECRET": "demo-only-secret-for-loopback",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
        "CDC_INGEST_CONFIG": str(DEMO / "pipelines.yaml"),
        "AIRFLOW_CONN_SPARK_LOCAL": '{"conn_type":"spark","host":"local[2]"}',
        "PYSPARK_PYTHON": sys.executable,
        # The demo's own warm engine, which every DAG task sends its batch to.
        "CDC_INGEST_ENGINE_DIR": str(DEMO / "engine"),
    }


def engine(action: str, env: dict[str, str]) -> bool:
    """``cdc-ingest engine <action>``, its line printed; whether it succeeded."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "cdc-ingest"), "engine", action],
        env=env,
        capture_output=True,
        text=True,
    )
    print((done.stdout + done.stderr).strip(), flush=True)
    return done.returncode == 0


def main() -> int:
    """Land the dumps, run the DAGs with a line of progress each, then print the report."""
    shutil.rmtree(DEMO, ignore_errors=True)
    LOGS.mkdir(parents=True)
    catalog, pipelines = land()
    dags = DEMO / "dags"
    dags.mkdir()
    shutil.copy(REPO / "dags" / "cdc_ingest_dags.py", dags / "cdc_ingest_dags.py")
    pipeline, table = DOWNSTREAM_TABLE
    uri = f"iceberg://{catalog['name']}/ods_{pipeline}/{table}"
    out = DEMO / "after_orders.txt"
    (dags / "after_orders.py").write_text(DOWNSTREAM_DAG.format(uri=uri, out=out))
    env = demo_env(dags)
    print(f"demo lake in {DEMO}; Airflow and Spark logs in {LOGS}", flush=True)
    for step in (["db", "migrate"], ["dags", "reserialize"], ["dags", "unpause", "after_orders"]):
        if airflow(step, env, "setup") != 0:
            print(f"airflow {' '.join(step)} failed: see {LOGS / 'setup.log'}")
            return 1
    started = time.monotonic()
    if not engine("start", env):
        return 1
    print(f"the warm engine answered in {time.monotonic() - started:.0f} s", flush=True)
    try:
        return run_dags(env, catalog, pipelines, dags, uri, out)
    finally:
        engine("stop", env)


def run_dags(
    env: dict[str, str],
    catalog: dict[str, str],
    pipelines: list[dict[str, Any]],
    dags: Path,
    uri: str,
    out: Path,
) -> int:
    """Every ingest DAG under one scheduler, the downstream DAG they trigger, then the report."""
    with services(env) as up:
        if not up:
            print(f"the Airflow API server did not answer: see {LOGS / 'api-server.log'}")
            return 1
        failed = run_ingest_dags(env, pipelines)
        if failed:
            logs = DEMO / "airflow" / "logs"
            print(f"failed: {', '.join(failed)}; their task logs are under {logs}/dag_id=<dag>")
            return 1
        print(f"downstream: after_orders is scheduled on {uri}", flush=True)
        finished = {"success", "failed"}
        wait_for(lambda: bool(finished & set(runs_of("after_orders"))), DOWNSTREAM_DEADLINE_S)
        if "success" not in runs_of("after_orders"):
            print(f"after_orders did not run: see {LOGS / 'scheduler.log'}")
            return 1
    print(f"after_orders ran, triggered by the ingest: {out.read_text().strip()}\n")

    from pyiceberg.catalog.sql import SqlCatalog

    lake = SqlCatalog(catalog["name"], uri=catalog["uri"], warehouse=catalog["warehouse"])
    print(report(lake, pipelines))
    home, config = DEMO / "airflow", DEMO / "pipelines.yaml"
    print("\nWhere to look next:")
    print(f"  status page: AIRFLOW_HOME={home} CDC_INGEST_CONFIG={config} airflow api-server,")
    print("               then open /cdc-ingest/ (docs/status-page.md)")
    print(f"  the DAGs:    ingest_* and maintain_* from {config}; after_orders in {dags}")
    print("  per namespace: _cdc_dead_letters (why a line was not applied), _cdc_ddl_history")
    print(f"  logs:        {LOGS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
