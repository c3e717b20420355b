"""Spike for issue 52: what a 1-line batch costs cold, on a warm classic driver, and what the same
statements cost through Spark Connect (3.5 and 4.1), all measured in one run.

Not part of ``make bench``: it starts servers and JVMs of other Spark versions. CPU is that of
every process involved (client and server trees), read from /proc.

    python scripts/spike_engine.py --workdir /tmp/spike/run [--connect35 JAR] [--spark4 VENV]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jobs"))

from bench_cold import PYTHON, ROOT, Lines, cold, timed, write_config
from bench_phases import tree_cpu_seconds

SERVER = r"""
import json, os, socket, sys, time
sys.path.insert(0, sys.argv[3])
from cdc_ingest.config import load_config
from cdc_ingest.run.batch import run_pipeline
from cdc_ingest.spark_session import build_session
config = load_config(sys.argv[2])
spark = build_session(config.catalog, app_name="spike-warm")
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1]); server.listen(1)
print("ready", flush=True)
while True:
    conn, _ = server.accept()
    request = json.loads(conn.makefile().readline())
    if request.get("stop"):
        conn.close(); break
    if "statements" in request:
        from spike_statements import statements
        carried = statements(spark, request["statements"], request["path"])
        conn.sendall((json.dumps({"property": carried}) + "\n").encode()); conn.close(); continue
    summary = run_pipeline(spark, load_config(request["config"]), request["pipeline"])
    conn.sendall((json.dumps({"applied": summary.messages}) + "\n").encode())
    conn.close()
spark.stop()
"""

CLIENT = r"""
import json, socket, sys
client = socket.socket(socket.AF_UNIX); client.connect(sys.argv[1])
client.sendall((sys.argv[2] + "\n").encode())
print(client.makefile().readline().strip())
"""


def warm_classic(
    workdir: Path, config: Path, lines: Lines, rounds: int, statement_path: Path
) -> dict[str, Any]:
    """A long-lived classic driver that runs each batch it is sent; a thin client sends it."""
    address = str(workdir / "engine.sock")
    Path(address).unlink(missing_ok=True)
    env = {**os.environ, "PYSPARK_PYTHON": PYTHON, "PYTHONPATH": str(Path(__file__).parent)}
    server = subprocess.Popen(
        [PYTHON, "-c", SERVER, address, str(config), str(ROOT / "jobs")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert server.stdout is not None
    started = time.monotonic()
    assert server.stdout.readline().strip() == "ready"
    start_wall, start_cpu = time.monotonic() - started, tree_cpu_seconds(server.pid)
    request = json.dumps({"config": str(config), "pipeline": "shop"})
    batches = []
    for number in range(rounds + 3):
        lines.land()
        before = tree_cpu_seconds(server.pid)
        wall, client_cpu, out = timed([PYTHON, "-c", CLIENT, address, request])
        engine_cpu = tree_cpu_seconds(server.pid) - before
        if number >= 3:  # the first batches compile what later ones reuse
            batches.append((wall, client_cpu, engine_cpu))
        assert json.loads(out)["applied"] == 1, out
    statements = []
    for number in range(rounds + 3):
        before = tree_cpu_seconds(server.pid)
        request = json.dumps({"statements": number, "path": str(statement_path)})
        wall, client_cpu, out = timed([PYTHON, "-c", CLIENT, address, request])
        if number >= 3:
            statements.append((wall, client_cpu, tree_cpu_seconds(server.pid) - before))
    print("classic: a session conf snapshot property reaches the MERGE's snapshot:", out.strip())
    timed([PYTHON, "-c", CLIENT, address, json.dumps({"stop": True})])
    server.wait(timeout=120)
    return {"start": (start_wall, start_cpu), "batches": batches, "statements": statements}


def wait_for_port(port: int, process: subprocess.Popen[Any], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise SystemExit("server did not answer")


CONNECT_CLIENT = r"""
import sys, time
sys.path.insert(0, sys.argv[3])
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote("sc://127.0.0.1:%s" % sys.argv[1]).getOrCreate()
from spike_statements import statements
print("PROPERTY", statements(spark, int(sys.argv[2]), sys.argv[4]))
"""


def warm_connect(
    python: str,
    server_command: list[str],
    port: int,
    rounds: int,
    statement_path: Path,
    env: dict[str, str],
) -> dict[str, Any]:
    """A Spark Connect server; each round a new client process runs the batch's statements."""
    # The server's log goes to a file: a pipe nobody reads fills, and log4j then blocks every
    # thread that logs (the spike's first Connect rounds hung on exactly that).
    log = (statement_path.parent / f"{statement_path.name}-server.log").open("w")
    server = subprocess.Popen(server_command, env=env, stdout=log, stderr=subprocess.STDOUT)
    started = time.monotonic()
    try:
        wait_for_port(port, server)
        start_wall = time.monotonic() - started
        # The launcher script exits; the JVM it started is the server.
        rounds_out = []
        for number in range(rounds + 3):
            before = sum(tree_cpu_seconds(pid) for pid in connect_pids())
            wall, client_cpu, out = timed(
                [
                    python,
                    "-c",
                    CONNECT_CLIENT,
                    str(port),
                    str(number),
                    str(Path(__file__).parent),
                    str(statement_path),
                ],
                env,
            )
            engine_cpu = sum(tree_cpu_seconds(pid) for pid in connect_pids()) - before
            if number >= 3:
                rounds_out.append((wall, client_cpu, engine_cpu))
        print("connect: the session conf's snapshot property reached the MERGE:", out.strip())
        return {"start_wall": start_wall, "statements": rounds_out}
    finally:
        for pid in connect_pids():
            os.kill(pid, 15)
        server.wait(timeout=60)


def connect_pids() -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            command = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if b"SparkConnectServer" in command and b"java" in command.split(b"\0")[0]:
            pids.append(int(name))
    return pids


def summarize(samples: list[tuple[float, ...]]) -> str:
    columns = list(zip(*samples, strict=True))
    return " / ".join(f"{statistics.median(c):.2f}" for c in columns)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connect35", help="spark-connect_2.12 jar for Spark 3.5")
    parser.add_argument("--spark4", help="a virtualenv with pyspark 4.x")
    parser.add_argument("--iceberg4", help="iceberg-spark-runtime for that Spark 4")
    parser.add_argument("--only", default="cold,classic,connect35,connect4")
    args = parser.parse_args()
    workdir: Path = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_config(workdir)
    lines = Lines(workdir)
    only = set(args.only.split(","))
    statement_path = workdir / "statements"
    results: dict[str, Any] = {}
    if "cold" in only:
        results["cold"] = cold(workdir, config, lines, args.rounds)
        print("cold bare (wall / cpu):", summarize(results["cold"]["bare"]), flush=True)
        print("cold cli  (wall / cpu):", summarize(results["cold"]["cli"]), flush=True)
    if "classic" in only:
        warm = warm_classic(workdir, config, lines, args.rounds, statement_path / "classic")
        results["classic"] = warm
        print("classic start (wall / cpu): {:.1f} / {:.1f}".format(*warm["start"]), flush=True)
        print("classic batch (wall / client / engine):", summarize(warm["batches"]), flush=True)
        print("classic statements (wall / client / engine):", summarize(warm["statements"]))
    from cdc_ingest.jars import job_jars

    sqlite = [j for j in job_jars() if "sqlite" in j]
    catalog = {
        "spark.sql.catalog.spike": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.spike.type": "jdbc",
        "spark.sql.catalog.spike.uri": f"jdbc:sqlite:{workdir / 'connect.db'}",
        "spark.sql.catalog.spike.warehouse": (workdir / "connect-warehouse").as_uri(),
        "spark.sql.catalog.spike.jdbc.schema-version": "V1",
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.ansi.enabled": "false",
        "spark.ui.enabled": "false",
    }
    conf = [item for key, value in catalog.items() for item in ("--conf", f"{key}={value}")]
    routes = []
    if "connect35" in only and args.connect35:
        import pyspark

        home35 = Path(str(pyspark.__file__)).parent
        iceberg35 = [j for j in job_jars() if "iceberg-spark" in j]
        routes.append(("connect35", "3.5", PYTHON, home35, [args.connect35, *iceberg35], 15035))
    if "connect4" in only and args.spark4:
        python4 = str(Path(args.spark4) / "bin" / "python")
        home4 = Path(
            subprocess.run(
                [python4, "-c", "import pyspark, os; print(os.path.dirname(pyspark.__file__))"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        routes.append(("connect4", "4", python4, home4, [args.iceberg4], 15040))
    for key, label, python, spark_home, jars, port in routes:
        command = [
            str(spark_home / "bin" / "spark-submit"),
            "--master",
            "local[*]",
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--jars",
            ",".join([*jars, *sqlite]),
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            *conf,
            "spark-internal",
        ]
        env = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": python}
        got = warm_connect(python, command, port, args.rounds, statement_path / key, env)
        results[key] = got
        print(f"connect {label} start wall: {got['start_wall']:.1f}")
        print(f"connect {label} statements (wall / client / engine):", summarize(got["statements"]))
    (workdir / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
