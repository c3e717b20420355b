"""One-line batches of a Canal pipeline, each a new landed file, and what a process costs them:
``timed`` (a command's whole process tree), ``cold`` (a run with no engine against bare Spark
sessions). Shared by ``bench_airflow.py`` and ``bench_fleet.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


# Runs a command as a child subreaper: the JVM a PySpark process starts outlives it and is
# reaped here, so RUSAGE_CHILDREN holds the whole tree's CPU.
TREE = r"""
import ctypes, os, resource, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
sys.stderr.write("\nTREE-CPU %f\n" % (usage.ru_utime + usage.ru_stime))
sys.exit(done.returncode)
"""


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall and CPU seconds of a command's whole process tree, and its output."""
    started = time.monotonic()
    done = subprocess.run(
        [PYTHON, "-c", TREE, *command], capture_output=True, text=True, env=env, check=False
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{command[:3]} failed ({done.returncode}):\n{done.stderr[:3000]}")
    cpu = float(done.stderr.rsplit("TREE-CPU ", 1)[1])
    return wall, cpu, done.stdout


def canal_line(key: int, es: int) -> str:
    return json.dumps(
        {
            "data": [{"id": str(key), "v": f"value {key}"}],
            "database": "shop",
            "table": "items",
            "pkNames": ["id"],
            "isDdl": False,
            "type": "INSERT",
            "es": es,
            "ts": es,
            "sql": "",
            "mysqlType": {"id": "int", "v": "varchar(40)"},
            "old": None,
        }
    )


def write_config(workdir: Path) -> Path:
    import yaml

    landing = workdir / "landing"
    landing.mkdir(parents=True, exist_ok=True)
    config = workdir / "pipelines.yaml"
    doc = {
        "catalog": {
            "name": "spike",
            "uri": f"sqlite:///{workdir / 'catalog.db'}",
            "warehouse": (workdir / "warehouse").as_uri(),
        },
        "pipelines": [
            {
                "name": "shop",
                "format": "canal-json",
                "landing": landing.as_uri(),
                "namespace": "ods",
            }
        ],
    }
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    return config


class Lines:
    """Lands one new line per call, each a new file."""

    def __init__(self, workdir: Path) -> None:
        self.landing, self.next = workdir / "landing", 1

    def land(self) -> None:
        path = self.landing / f"{self.next:06d}.json"
        path.write_text(canal_line(self.next, 1_700_000_000_000 + self.next) + "\n")
        self.next += 1


def cold(workdir: Path, config: Path, lines: Lines, rounds: int) -> dict[str, Any]:
    """A bare PySpark session counting one row, the same appending one row to an Iceberg table,
    and ``cdc-ingest run`` of a 1-line batch."""
    env = {**os.environ, "PYSPARK_PYTHON": PYTHON}
    bare = (
        "import sys; sys.path.insert(0, {!r})\n"
        "from cdc_ingest.spark_session import session_conf\n"
        "from cdc_ingest.jars import job_jars\n"
        "from pyspark.sql import SparkSession\n"
        "b = SparkSession.builder.master('local[*]').config('spark.jars', ','.join(job_jars()))\n"
        "for k, v in session_conf().items(): b = b.config(k, v)\n"
        "s = b.getOrCreate(); print(s.range(1).count()); s.stop()\n"
    ).format(str(ROOT / "jobs"))
    # The same bare session with the pipeline's catalog, appending one row to an Iceberg table:
    # the least a run that commits to Iceberg does (docs/performance.md, the cold target).
    append = (
        "import sys; sys.path.insert(0, {!r})\n"
        "from cdc_ingest.config import load_config\n"
        "from cdc_ingest.spark_session import catalog_conf, session_conf\n"
        "from cdc_ingest.jars import job_jars\n"
        "from pyspark.sql import SparkSession\n"
        "catalog = load_config({!r}).catalog\n"
        "b = SparkSession.builder.master('local[*]').config('spark.jars', ','.join(job_jars()))\n"
        "for k, v in {{**session_conf(), **catalog_conf(catalog)}}.items(): b = b.config(k, v)\n"
        "s = b.getOrCreate(); t = catalog.name + '.bare.appended'\n"
        "s.sql('CREATE NAMESPACE IF NOT EXISTS ' + catalog.name + '.bare')\n"
        "s.sql('CREATE TABLE IF NOT EXISTS ' + t + ' (id BIGINT, v STRING) USING iceberg')\n"
        "s.sql('INSERT INTO ' + t + \" VALUES (1, 'one')\"); s.stop()\n"
    ).format(str(ROOT / "jobs"), str(config))
    cli = [str(Path(PYTHON).parent / "cdc-ingest"), "run", "--config", str(config), "--pipeline"]
    lines.land()
    timed([*cli, "shop"], env)  # creates the table
    timed([PYTHON, "-c", append], env)  # creates its table
    bares, appends, runs = [], [], []
    for _ in range(rounds):
        bares.append(timed([PYTHON, "-c", bare], env)[:2])
        appends.append(timed([PYTHON, "-c", append], env)[:2])
        lines.land()
        runs.append(timed([*cli, "shop"], env)[:2])
    return {"bare": bares, "append": appends, "cli": runs}
