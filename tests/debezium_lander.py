"""Real Debezium connectors, run by Debezium's embedded engine, landing their change events as a
Kafka Connect S3 sink lands them (tests/debezium_lander/Lander.java says how).

``make install`` resolves each producer's jars from Maven Central (``python
tests/debezium_lander.py``) and compiles the lander against them; the tests then start it with
:class:`RunningLander` and wait for the events of what they changed.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cdc_ingest.jars import Artifact, EnvironmentProblem, jars_dir, resolve

SOURCE = Path(__file__).parent / "debezium_lander" / "Lander.java"
# PostgreSQL's connector at the release the project targets; MariaDB's newest on Maven Central
# is 3.5.0.Final (the MySQL connector 3.6.1 refuses MariaDB 10.11), run with its own engine.
PRODUCERS: dict[str, tuple[Artifact, ...]] = {
    "postgres": (
        Artifact("io.debezium", "debezium-embedded", "3.6.1.Final"),
        Artifact("io.debezium", "debezium-connector-postgres", "3.6.1.Final"),
    ),
    "mariadb": (
        Artifact("io.debezium", "debezium-embedded", "3.5.0.Final"),
        Artifact("io.debezium", "debezium-connector-mariadb", "3.5.0.Final"),
        Artifact("io.debezium", "debezium-storage-file", "3.5.0.Final"),
    ),
}
CONNECTORS = {
    "postgres": "io.debezium.connector.postgresql.PostgresConnector",
    "mariadb": "io.debezium.connector.mariadb.MariaDbConnector",
}


def producer_dir(producer: str) -> Path:
    """Where a producer's jars and compiled lander live (beside the job's jars)."""
    return jars_dir().parent / "debezium" / producer


def prepare(producer: str) -> Path:
    """Resolve the producer's jars (with their dependencies) and compile the lander; returns the
    directory. Quick when both are done: Maven is not asked again."""
    home = producer_dir(producer)
    jars = home / "jars"
    resolve(PRODUCERS[producer], jars, transitive=True)
    classes = home / "classes"
    compiled = classes / "Lander.class"
    if not compiled.is_file() or compiled.stat().st_mtime < SOURCE.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["javac", "-nowarn", "-cp", f"{jars}/*", "-d", str(classes), str(SOURCE)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise EnvironmentProblem(f"javac could not compile the lander: {done.stderr}")
    return home


def unavailable_reason(producer: str) -> str | None:
    """Why the producer cannot run here (not resolved by make install), or None."""
    home = producer_dir(producer)
    if not (home / "classes" / "Lander.class").is_file():
        return f"Debezium {producer} not prepared under {home}: run make install"
    if shutil.which("java") is None:
        return "no java on PATH"
    return None


@dataclass
class Landed:
    """One record the lander put in place: its topic and Kafka offset."""

    topic: str
    offset: int


class RunningLander:
    """A lander process: a connector streaming into ``landing`` in one of the two shapes."""

    def __init__(
        self, producer: str, properties: dict[str, str], landing: Path, shape: str, work: Path
    ) -> None:
        self.home = prepare(producer)
        self.landing = landing
        work.mkdir(parents=True, exist_ok=True)
        settings = {
            "name": f"lander-{producer}",
            "connector.class": CONNECTORS[producer],
            "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
            "offset.storage.file.filename": str(work / "offsets.dat"),
            "offset.flush.interval.ms": "0",
            **properties,
        }
        # The password is in this file, not on a command line.
        config = work / "connector.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        os.chmod(config, 0o600)
        self.stderr = open(work / "lander.log", "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [
                "java",
                "-Xmx512m",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                f"{self.home / 'jars'}/*:{self.home / 'classes'}",
                "Lander",
                str(config),
                str(landing),
                shape,
            ],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.landed: list[Landed] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for text in self.process.stdout:
            self._lines.put(text.rstrip("\n"))
        self._lines.put(None)

    def wait_for(self, topic: str, count: int, timeout: float = 180.0) -> None:
        """Block until ``count`` records of ``topic`` have landed in all (the marker a test
        writes after its changes: every change before it has landed by then)."""
        deadline = time.monotonic() + timeout
        while sum(1 for r in self.landed if r.topic == topic) < count:
            try:
                text = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                text = None
            if text is None:
                log = Path(self.stderr.name).read_text(errors="replace")[-4000:]
                raise RuntimeError(f"lander stopped or timed out waiting for {topic}:\n{log}")
            if text.startswith("landed "):
                _, name, offset = text.split(" ")
                self.landed.append(Landed(name, int(offset)))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.stderr.close()


def main() -> int:
    """``python tests/debezium_lander.py``: resolve and compile every producer (make install)."""
    for producer in PRODUCERS:
        try:
            print(prepare(producer))
        except EnvironmentProblem as exc:
            print(f"debezium lander: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
