"""A Spark standalone cluster on loopback, from the pyspark distribution: a master, workers on call.

``spark-class org.apache.spark.deploy.master.Master`` and ``...deploy.worker.Worker`` are the
daemons ``sbin/start-master.sh`` and ``start-worker.sh`` would start; run in the foreground, they
die with the test. The master's JSON API (``/json/``) says which applications ran and on which
workers; the worker keeps each executor's logs under its work directory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakehouses import free_port

VENV_BIN = Path(sys.executable).parent
START_TIMEOUT_S = 90.0


@dataclass
class SparkCluster:
    """A running master and its workers."""

    root: Path
    env: dict[str, str]
    port: int
    web_port: int
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def state(self) -> dict[str, Any]:
        """The master's JSON API: workers, active and completed applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=10) as r:
            state: dict[str, Any] = json.load(r)
        return state

    def wait_for(self, what: str, condition: Any, timeout: float = START_TIMEOUT_S) -> Any:
        """Poll the master until ``condition(state)`` is truthy; return its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = condition(self.state())
            except (OSError, ValueError):
                # Not up yet, or not yet serving its JSON (an HTML page where JSON was asked for).
                value = None
            if value:
                return value
            time.sleep(0.25)
        raise TimeoutError(f"Spark master: {what} not seen within {timeout:g}s")

    def start_worker(self, cores: int = 1, memory: str = "1g") -> subprocess.Popen[bytes]:
        """Start a worker and wait until the master counts it alive."""
        index = len(self.workers)
        work = self.root / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        # By id, not by count: a worker killed just before may still be counted alive.
        alive_before = self._alive_ids(self.state())
        log = (self.root / f"worker-{index}.log").open("wb")
        worker = subprocess.Popen(
            [
                str(VENV_BIN / "spark-class"),
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                "127.0.0.1",
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(work),
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.workers.append(worker)
        self.wait_for("a new alive worker", lambda s: bool(self._alive_ids(s) - alive_before))
        return worker

    @staticmethod
    def _alive_ids(state: dict[str, Any]) -> set[str]:
        return {w["id"] for w in state.get("workers", []) if w.get("state") == "ALIVE"}

    def kill_worker(self, worker: subprocess.Popen[bytes]) -> None:
        """kill -9 the worker and every executor it started (its process group)."""
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()

    def wait_for_finished_task(self, timeout: float = START_TIMEOUT_S) -> None:
        """Poll the executors' logs until one reports a finished task (a batch is under way)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any("Finished task" in p.read_text(errors="replace") for p in self.executor_logs()):
                return
            time.sleep(0.2)
        raise TimeoutError(f"no executor finished a task within {timeout:g}s")

    def executor_logs(self) -> list[Path]:
        """Every executor's stderr under the workers' work directories."""
        return sorted(self.root.glob("worker-*/app-*/*/stderr"))


def _bound_ports(log: Path, master: subprocess.Popen[bytes]) -> tuple[int, int]:
    """The ports the master bound, from its log: Spark moves to the next port when one is taken."""
    rpc = re.compile(r"Starting Spark master at spark://[^:/]+:(\d+)")
    web = re.compile(r"Bound MasterWebUI to .*, and started at https?://[^:/]+:(\d+)")
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        found_rpc, found_web = rpc.search(text), web.search(text)
        if found_rpc and found_web:
            return int(found_rpc.group(1)), int(found_web.group(1))
        if master.poll() is not None:
            raise RuntimeError(f"Spark master exited with {master.returncode}: see {log}")
        time.sleep(0.25)
    raise TimeoutError(f"Spark master: its ports not bound within {START_TIMEOUT_S:g}s")


@contextmanager
def spark_cluster(root: Path, env: dict[str, str]) -> Iterator[SparkCluster]:
    """A master on loopback (no worker yet: call :meth:`SparkCluster.start_worker`)."""
    root.mkdir(parents=True, exist_ok=True)
    cluster_env = {**env, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(root)}
    cluster = SparkCluster(root=root, env=cluster_env, port=free_port(), web_port=free_port())
    log = (root / "master.log").open("wb")
    master = subprocess.Popen(
        [
            str(VENV_BIN / "spark-class"),
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(cluster.port),
            "--webui-port",
            str(cluster.web_port),
        ],
        env=cluster_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        cluster.port, cluster.web_port = _bound_ports(root / "master.log", master)
        cluster.wait_for(
            "the master's JSON API",
            lambda s: s.get("status") == "ALIVE" and s.get("url") == cluster.url,
        )
        yield cluster
    finally:
        for worker in cluster.workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        os.killpg(master.pid, signal.SIGTERM)
        try:
            master.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(master.pid, signal.SIGKILL)
            master.wait()
