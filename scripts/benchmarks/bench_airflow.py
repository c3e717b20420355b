"""``make bench``, section "as Airflow runs it": what a small batch costs a user, whole process
trees, the warm engine's CPU included (docs/engine.md, docs/performance.md).

- warm: a 1-line batch into an existing table through ``cdc-ingest run`` on the engine (client
  and engine together: at most 3 CPU-s and 5 s wall);
- cold: the same batch with no engine, against a bare PySpark session that starts and counts one
  row, measured in the same run (at most 1.3x); and against the same bare session appending one
  row to an Iceberg table of the pipeline's catalog (reported: the reference docs/performance.md
  proposes for a run that commits to Iceberg);
- DAG: ``airflow dags test`` of a 1-line batch on the engine, against the same DAG with nothing
  new (at most 1.5x);
- memory: the engine's resident memory and loaded classes after many warm batches, against after
  a tenth of them (within 10%).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scripts.benchmarks.bench_cold import Lines, cold, timed, write_config
from scripts.benchmarks.bench_phases import tree_cpu_seconds
from scripts.benchmarks.bench_table import Shape, save, table

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CLI = str(BIN / "cdc-ingest")


def engine_pid(env: dict[str, str]) -> int:
    status = subprocess.run([CLI, "engine", "status"], env=env, capture_output=True, text=True)
    assert status.returncode == 0, status.stdout
    return int(status.stdout.split(": pid ")[1].split(",")[0])


def engine_memory(env: dict[str, str]) -> tuple[float, int]:
    status = subprocess.run([CLI, "engine", "status"], env=env, capture_output=True, text=True)
    rss = float(status.stdout.split(" MiB resident")[0].rsplit(" ", 1)[1])
    classes = int(status.stdout.split(" classes")[0].rsplit(" ", 1)[1])
    return rss, classes


def warm(env: dict[str, str], config: Path, lines: Lines, rounds: int) -> list[tuple[float, float]]:
    """(wall, CPU of client and engine) of 1-line batches on the engine, after warm-ups."""
    pid = engine_pid(env)
    command = [CLI, "run", "--config", str(config), "--pipeline", "shop"]
    samples = []
    for number in range(rounds + 3):
        lines.land()
        before = tree_cpu_seconds(pid)
        wall, client, _ = timed(command, env)
        if number >= 3:  # the first batches compile what later ones reuse
            samples.append((wall, client + tree_cpu_seconds(pid) - before))
    return samples


def memory(env: dict[str, str], config: Path, lines: Lines, batches: int) -> tuple[str, bool]:
    """The engine's memory after a tenth of ``batches`` warm batches and after all of them."""
    command = [CLI, "run", "--config", str(config), "--pipeline", "shop"]
    early = None
    for number in range(1, batches + 1):
        lines.land()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        if number == batches // 10:
            early = engine_memory(env)
    late = engine_memory(env)
    assert early is not None
    within = late[0] <= early[0] * 1.1 and late[1] <= early[1] * 1.1
    text = (
        f"{late[0]:.0f} MiB, {late[1]} classes after {batches}; "
        f"{early[0]:.0f} MiB, {early[1]} classes after {batches // 10}"
    )
    return text, within


def dag(workdir: Path, env: dict[str, str], config: Path, lines: Lines) -> tuple[float, float]:
    """CPU of ``airflow dags test`` with nothing new, and with one new line (engine included)."""
    home = workdir / "airflow"
    airflow_env = {
        **env,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "CDC_INGEST_CONFIG": str(config),
        "AIRFLOW_CONN_SPARK_LOCAL": '{"conn_type":"spark","host":"local[*]"}',
        "PATH": os.pathsep.join([str(BIN), env.get("PATH", "")]),
    }
    airflow = [str(BIN / "airflow")]
    timed([*airflow, "db", "migrate"], airflow_env)
    test = [*airflow, "dags", "test", "ingest_shop"]
    pid = engine_pid(env)
    idle, busy = [], []
    for _ in range(3):
        idle.append(timed(test, airflow_env)[1])
        lines.land()
        before = tree_cpu_seconds(pid)
        cpu = timed(test, airflow_env)[1]
        busy.append(cpu + tree_cpu_seconds(pid) - before)
    return statistics.median(idle), statistics.median(busy)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=Path)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="bench-airflow-"))).resolve()
    shutil.rmtree(workdir, ignore_errors=True)  # a previous run's landed files and tables
    workdir.mkdir(parents=True)
    config = write_config(workdir)
    lines = Lines(workdir)
    rounds = 3 if args.quick else 5
    # The cold runs below find no engine there; the warm ones, the one started there.
    os.environ["CDC_INGEST_ENGINE_DIR"] = str(workdir / "engine")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop("SPARK_SUBMIT_OPTS", None)
    shapes = []

    measured = cold(workdir, config, lines, rounds)
    bare = statistics.median(cpu for _, cpu in measured["bare"])
    cli = statistics.median(cpu for _, cpu in measured["cli"])
    append = statistics.median(cpu for _, cpu in measured["append"])
    shapes.append(Shape("cold 1-line batch", f"{cli:.1f}", f"{bare:.1f} bare", cli / bare, 1.3))
    shapes.append(
        Shape(
            "cold vs append",
            f"{cli:.1f}",
            f"{append:.1f} bare Iceberg append",
            cli / append,
            0.0,
            other_target=("reported", True),
        )
    )

    subprocess.run([CLI, "engine", "start", "--config", str(config)], env=env, check=True)
    try:
        # Memory first: the warm figures are then those of an engine that has run a while, as a
        # long-lived one has (its JIT done with what batches of this shape run).
        batches = 60 if args.quick else 300
        text, within = memory(env, config, lines, batches)
        samples = warm(env, config, lines, rounds)
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        shapes.append(
            Shape(
                "warm 1-line batch",
                f"{cpu:.1f} ({wall:.1f} s wall)",
                "-",
                0.0,
                0.0,
                other_target=("<= 3 CPU-s, 5 s", cpu <= 3.0 and wall <= 5.0),
            )
        )
        idle, busy = dag(workdir, env, config, lines)
        shapes.append(
            Shape("DAG 1-line batch", f"{busy:.1f}", f"{idle:.1f} idle", busy / idle, 1.5)
        )
        shapes.append(
            Shape("engine memory", text, "-", 0.0, 0.0, other_target=("within 10%", within))
        )
    finally:
        subprocess.run([CLI, "engine", "stop"], env=env, check=False)
    for line in table(shapes):
        print(line, flush=True)
    save(shapes, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
