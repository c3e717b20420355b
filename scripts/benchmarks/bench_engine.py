"""How ``make bench`` sends a batch: through the warm engine, as ``cdc-ingest run`` and Airflow's
tasks do (the default), or into the bench's own Spark session (``--in-process``).

Through the engine a batch costs what a user pays for it: the client process (``cdc-ingest run
--json``, its summary read back from its last line) and the engine's CPU while the batch ran,
whole process trees. The references (parse only, hand-written jobs) stay in the bench's own warm
session: a JVM of the same settings. In the bench's session the batch's stages are timed too
(``bench_phases.render_phases``), which a run on the engine does not report.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_ingest.config import load_config
from cdc_ingest.state.summary import RunSummary

from scripts.benchmarks.bench_phases import tree_cpu_seconds

if TYPE_CHECKING:
    from cdc_ingest.stages import StageTimings
    from pyspark.sql import SparkSession

CLI = str(Path(sys.executable).parent / "cdc-ingest")


@dataclass
class Batch:
    wall: float
    cpu: float
    summary: RunSummary
    timings: StageTimings | None  # the stages, in the bench's session only


def add_route_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the batches in the bench's own Spark session (their stages are timed) instead "
        "of through the warm engine",
    )


class SessionBatches:
    """Batches run by ``run_pipeline`` in the bench's session."""

    route = "in the bench's session"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def run(self, config: Path, pipeline: str) -> Batch:
        from cdc_ingest.run.batch import run_pipeline
        from cdc_ingest.stages import StageTimings, recording

        loaded = load_config(config)
        timings = StageTimings(cpu_clock=tree_cpu_seconds)
        with recording(timings):
            start, cpu = time.perf_counter(), tree_cpu_seconds()
            summary = run_pipeline(self.spark, loaded, pipeline)
            wall = time.perf_counter() - start
        return Batch(wall, tree_cpu_seconds() - cpu, summary, timings)

    def close(self) -> None:
        """Stop the session (it was the bench's, made for these batches)."""
        self.spark.stop()


class EngineBatches:
    """Batches run by ``cdc-ingest run`` on an engine of this bench's own (in ``directory``),
    started with the driver memory of the bench's session if it has one; that session is told
    each batch's catalog, so that the references and checks read the tables the engine wrote."""

    route = "through the warm engine"

    def __init__(self, spark: SparkSession | None, directory: Path) -> None:
        self.spark = spark
        self.settings = {"CDC_INGEST_ENGINE_DIR": str(directory), "PYSPARK_PYTHON": sys.executable}
        if spark is not None:
            self.settings["SPARK_DRIVER_MEMORY"] = spark.conf.get("spark.driver.memory") or "4g"
        started = subprocess.run(
            [CLI, "engine", "start"], env=self.env(), capture_output=True, text=True
        )
        if started.returncode != 0:
            raise SystemExit(f"the bench's engine did not start: {started.stderr.strip()}")
        self.pid = int(started.stdout.split("(pid ")[1].split(")")[0])

    def env(self) -> dict[str, str]:
        """This process's environment as it is now (the bench sets a store's keys as it goes),
        with the engine's settings."""
        env = {**os.environ, **self.settings}
        env.pop("SPARK_SUBMIT_OPTS", None)  # a profiler's agent, say: not the engine's
        env.pop("CDC_INGEST_ENGINE", None)
        return env

    def run(self, config: Path, pipeline: str) -> Batch:
        from cdc_ingest.spark_session import configure_catalog

        command = [CLI, "run", "--config", str(config), "--pipeline", pipeline, "--json"]
        engine_cpu, own_cpu = tree_cpu_seconds(self.pid), tree_cpu_seconds()
        start = time.perf_counter()
        done = subprocess.run(command, env=self.env(), capture_output=True, text=True)
        wall = time.perf_counter() - start
        cpu = tree_cpu_seconds() - own_cpu + tree_cpu_seconds(self.pid) - engine_cpu
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-3000:]}")
        summary = RunSummary.from_json(done.stdout.strip().splitlines()[-1])
        if self.spark is not None:
            configure_catalog(self.spark, load_config(config).catalog)
        return Batch(wall, cpu, summary, None)

    def close(self) -> None:
        """Stop the engine (the bench's session, if any, is the bench's to stop)."""
        subprocess.run([CLI, "engine", "stop"], env=self.env(), capture_output=True, check=False)


def batches_for(
    in_process: bool, spark: SparkSession | None, directory: Path
) -> SessionBatches | EngineBatches:
    """The route ``--in-process`` chose: ``spark`` runs the batches itself, or an engine in
    ``directory`` does (``spark``, if any, then only reads what it wrote)."""
    if in_process:
        assert spark is not None, "a batch in the bench's session needs that session"
        return SessionBatches(spark)
    return EngineBatches(spark, directory)
