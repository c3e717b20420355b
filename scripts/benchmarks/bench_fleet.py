"""``make bench``, "as Airflow runs it": a fleet of 20 pipelines with one small file each,
triggered together under a real Airflow scheduler (LocalExecutor) with the warm engine. Target:
all applied within 5 minutes of wall time on 2 cores; the total CPU (scheduler, its task
processes, the API server and the engine) is reported.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from scripts.benchmarks.bench_cold import canal_line
from scripts.benchmarks.bench_phases import tree_cpu_seconds
from scripts.benchmarks.bench_table import Shape, save, table
from scripts.demo.run import answers, free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PIPELINES = 20
DEADLINE_S = 300


def write_fleet(workdir: Path) -> Path:
    pipelines = []
    for number in range(1, PIPELINES + 1):
        landing = workdir / "landing" / f"fleet_{number:02d}"
        landing.mkdir(parents=True)
        (landing / "0001.json").write_text(
            "".join(canal_line(k, 1_700_000_000_000 + k) + "\n" for k in range(3))
        )
        pipelines.append(
            {
                "name": f"fleet_{number:02d}",
                "format": "canal-json",
                "landing": landing.as_uri(),
                "namespace": f"ods_{number:02d}",
                "schedule": "0 0 * * *",
                "retries": 0,
            }
        )
    catalog = {
        "name": "lake",
        "uri": f"sqlite:///{workdir / 'catalog.db'}",
        "warehouse": (workdir / "warehouse").as_uri(),
    }
    config = workdir / "pipelines.yaml"
    config.write_text(yaml.safe_dump({"catalog": catalog, "pipelines": pipelines}))
    return config


def states(home: Path) -> list[str]:
    with sqlite3.connect(home / "airflow.db") as db:
        rows = db.execute("SELECT state FROM dag_run WHERE dag_id LIKE 'ingest_fleet_%'")
        return [r[0] for r in rows.fetchall()]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=Path)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench-data" / "fleet")
    args = parser.parse_args()
    workdir: Path = args.workdir.resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    config = write_fleet(workdir)
    dags = workdir / "dags"
    dags.mkdir()
    shutil.copy(ROOT / "dags" / "cdc_ingest_dags.py", dags / "cdc_ingest_dags.py")
    home, port = workdir / "airflow", str(free_port())
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__PORT": port,
        "AIRFLOW__API_AUTH__JWT_SECRET": "bench-only-secret-for-loopback",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
        "CDC_INGEST_CONFIG": str(config),
        "CDC_INGEST_ENGINE_DIR": str(workdir / "engine"),
        "AIRFLOW_CONN_SPARK_LOCAL": '{"conn_type":"spark","host":"local[*]"}',
        "PYSPARK_PYTHON": sys.executable,
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
    }
    env.pop("SPARK_SUBMIT_OPTS", None)
    airflow, log = str(BIN / "airflow"), (workdir / "airflow.log").open("a")
    for step in (["db", "migrate"], ["dags", "reserialize"]):
        subprocess.run([airflow, *step], env=env, stdout=log, stderr=log, check=True)
    cli = str(BIN / "cdc-ingest")
    subprocess.run([cli, "engine", "start", "--config", str(config)], env=env, check=True)
    processes: list[subprocess.Popen[Any]] = []
    health = f"http://127.0.0.1:{port}/api/v2/monitor/health"
    try:
        for command in (["api-server", "--port", port], ["scheduler"]):
            processes.append(
                subprocess.Popen(
                    [airflow, *command], env=env, stdout=log, stderr=log, start_new_session=True
                )
            )
            if command[0] == "api-server":
                assert wait_for(lambda: answers(health), 120), "the API server did not answer"
        status = subprocess.run([cli, "engine", "status"], env=env, capture_output=True, text=True)
        engine = int(status.stdout.split(": pid ")[1].split(",")[0])
        roots = [engine, *(p.pid for p in processes)]
        before = sum(tree_cpu_seconds(pid) for pid in roots)
        started = time.monotonic()
        unpause = [airflow, "dags", "unpause", "--treat-dag-id-as-regex", "-y", "^ingest_fleet_"]
        subprocess.run(unpause, env=env, stdout=log, stderr=log, check=True)

        def finished() -> bool:
            done = [s for s in states(home) if s in ("success", "failed")]
            return len(done) >= PIPELINES

        wait_for(finished, 2 * DEADLINE_S)
        wall = time.monotonic() - started
        cpu = sum(tree_cpu_seconds(pid) for pid in roots) - before
        succeeded = states(home).count("success")
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            process.wait(timeout=120)
        subprocess.run([cli, "engine", "stop"], env=env, check=False)
    applied = succeeded == PIPELINES
    shapes = [
        Shape(
            f"fleet of {PIPELINES} DAG runs",
            f"{cpu:.0f} ({wall:.0f} s wall, {succeeded} applied)",
            "-",
            0.0,
            0.0,
            other_target=("all in 300 s", applied and wall <= DEADLINE_S),
        )
    ]
    for line in table(shapes):
        print(line, flush=True)
    save(shapes, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
