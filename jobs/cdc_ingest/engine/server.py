"""The warm engine: a long-lived PySpark driver that runs the batches callers send it.

Each request is ``cdc-ingest run`` or ``maintain`` exactly as a cold process would run it (the
CLI hands the engine its runner, :func:`cdc_ingest.cli.execute_argv`: the engine never imports
the CLI), in a thread of its own, with:

- the caller's environment (:mod:`cdc_ingest.run_environment`): its secrets and switches;
- a Spark session of its own catalog settings: sessions share the driver's SparkContext (its JVM,
  compiled plans and generated classes: what makes a warm batch cheap) but not their SQL
  settings or catalogs; one session per distinct set of catalog settings is kept and reused, so a
  pipeline's catalog client (a JDBC pool, an HTTP client) is built once, not once per batch;
- its output sent to the caller as it is written (the task's log under Airflow);
- its Spark jobs in a job group cancelled if the caller goes away (a killed task).

A batch that fails fails alone: its exception is reported to its caller as a cold run would
report it. A batch that kills the process (the fault-injection exits, an out-of-memory) ends every
batch in flight; each caller sees the engine gone and fails in one line, and the commit protocol
makes the rerun apply each batch exactly once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from cdc_ingest import spark_jvm
from cdc_ingest.engine.place import EnginePlace
from cdc_ingest.engine.protocol import EXIT_RUN_COLD, replies, send
from cdc_ingest.run_environment import using

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.catalog.config import CatalogConfig
    from cdc_ingest.lineage import LineageConfig


# Runs ``cdc-ingest <argv>`` from directory ``cwd`` on a session from the factory; its exit status.
Runner = Callable[[list[str], str, Callable[..., "SparkSession"]], int]
EXIT_FAILED = 1
# Sessions kept for reuse, one per distinct catalog settings, least recently used dropped first.
SESSIONS_KEPT = 16


class RunCold(Exception):
    """This batch needs a driver of its own (see ``EXIT_RUN_COLD``)."""


class _ThreadStreams:
    """``sys.stdout`` or ``sys.stderr`` for a process whose threads run different callers'
    batches: a thread serving a caller writes to that caller, any other to the engine's log."""

    def __init__(self, fallback: TextIO, kind: str, sinks: threading.local) -> None:
        self._fallback, self._kind, self._sinks = fallback, kind, sinks

    def write(self, text: str) -> int:
        sink: Callable[[str, str], None] | None = getattr(self._sinks, "sink", None)
        if sink is None:
            return self._fallback.write(text)
        sink(self._kind, text)
        return len(text)

    def flush(self) -> None:
        self._fallback.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fallback, name)


class Engine:
    """The driver's state: its base session, the sessions of each catalog, its counters."""

    def __init__(self, base: SparkSession, parallel: int, runner: Runner) -> None:
        self.base, self.runner = base, runner
        self.slots = threading.BoundedSemaphore(parallel)
        self.parallel = parallel
        self.sessions: dict[str, SparkSession] = {}
        # Secret settings' keys the event log is told to redact (``_redact_in_event_logs``).
        self.redacted: set[str] = set()
        self.sessions_lock = threading.Lock()
        self.started = time.time()
        self.batches = 0
        self.running = 0
        self.counters_lock = threading.Lock()
        self.stopping = threading.Event()
        self.sinks = threading.local()

    def session(
        self,
        catalog: CatalogConfig,
        app_name: str,
        lineage: LineageConfig | None,
        planned: int | None = None,
    ) -> SparkSession:
        """The session for ``catalog``'s settings (with the caller's secrets), made once."""
        from cdc_ingest.spark_session import catalog_conf, warm_sized_for_batch

        if lineage is not None:
            raise RunCold
        conf = warm_sized_for_batch(self.base, catalog_conf(catalog), planned)
        # Kept in memory only; the key hides the settings it is made of.
        key = hashlib.sha256(json.dumps(conf, sort_keys=True).encode()).hexdigest()
        with self.sessions_lock:
            session = self.sessions.pop(key, None)
            if session is None:
                self._redact_in_event_logs(conf)
                session = self.base.newSession()
                for name in self.redacted - conf.keys():
                    session.conf.unset(name)
                for name, value in conf.items():
                    session.conf.set(name, value)
            # Most recently used last; settings that change with every batch (short-lived
            # credentials) must not grow the engine without bound.
            self.sessions[key] = session
            while len(self.sessions) > SESSIONS_KEPT:
                self.sessions.pop(next(iter(self.sessions)))
        session.sparkContext.setLocalProperty("spark.job.description", app_name)
        # The batch's thread runs with its session active: a direct JVM call (Iceberg's
        # Spark3Util, a catalog manager) reads the settings of the thread's active session, not
        # of the session it is given, and would look for the batch's catalog in the engine's.
        spark_jvm.activate(session)
        return session

    def _redact_in_event_logs(self, conf: dict[str, str]) -> None:
        """Make the event log redact this session's secrets.

        A session's SQL settings travel with each of its Spark jobs as job properties, which
        the event log writes out; it redacts only those whose keys the application's own
        SparkConf holds (a cold run's catalog settings are there, a warm session's are not). The
        secret keys get a placeholder there (never a session's value: each session sets its own,
        and ``session`` unsets the placeholders a session has no value for). A key the
        application was started with (``spark.conf`` of the pipelines file) is redacted already
        and keeps its value for the sessions that do not set their own."""
        from cdc_ingest.spark_session import REDACTION_REGEX

        pattern = re.compile(REDACTION_REGEX)
        for name in conf:
            if (
                pattern.search(name)
                and name not in self.redacted
                and spark_jvm.set_application_default(self.base, name, "set by each batch")
            ):
                self.redacted.add(name)

    def status(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "started": self.started,
            "batches": self.batches,
            "running": self.running,
            "parallel": self.parallel,
            "sessions": len(self.sessions),
            "master": self.base.sparkContext.master,
            "spark": self.base.version,
            "rss_bytes": _rss_bytes(),
            "loaded_classes": spark_jvm.loaded_class_count(self.base),
        }


def _rss_bytes() -> int:
    """Resident memory of the driver's process tree (this Python and its JVM)."""
    me = os.getpid()
    pids = [me]
    with contextlib.suppress(OSError):
        pids += [int(c) for c in Path(f"/proc/{me}/task/{me}/children").read_text().split()]
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def _run_request(engine: Engine, conn: socket.socket, request: dict[str, Any]) -> None:
    sent = threading.Lock()

    def sink(kind: str, text: str) -> None:
        # A caller that went away gets nothing more; its jobs are being cancelled.
        with sent, contextlib.suppress(OSError):
            send(conn, {kind: text})

    group = f"cdc-ingest-{threading.get_ident()}-{time.monotonic_ns()}"
    watcher = threading.Thread(target=_cancel_when_gone, args=(engine, conn, group), daemon=True)
    with engine.slots:
        with engine.counters_lock:
            engine.running += 1
        engine.sinks.sink = sink
        try:
            with using(request.get("env") or {}):
                engine.base.sparkContext.setJobGroup(group, "cdc-ingest batch", True)
                watcher.start()
                status = _execute(engine, request)
        finally:
            engine.sinks.sink = None
            # None removes the property (Spark's documented meaning; pyspark's stub says str).
            engine.base.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            with engine.counters_lock:
                engine.running -= 1
                engine.batches += 1
    with sent, contextlib.suppress(OSError):
        send(conn, {"exit": status})


def _execute(engine: Engine, request: dict[str, Any]) -> int:
    try:
        return engine.runner(list(request["run"]), request.get("cwd", "/"), engine.session)
    except RunCold:
        return EXIT_RUN_COLD
    except Exception:
        # A bug, as a cold run would show it: its traceback goes to its caller.
        traceback.print_exc(file=sys.stderr)
        return EXIT_FAILED


def _cancel_when_gone(engine: Engine, conn: socket.socket, group: str) -> None:
    """Cancel the batch's Spark jobs once its caller hangs up (nothing else comes from it)."""
    try:
        while conn.recv(1024):
            pass
    except OSError:
        pass
    if not engine.stopping.is_set():
        engine.base.sparkContext.cancelJobGroup(group)


def _handle(engine: Engine, conn: socket.socket) -> None:
    try:
        request = next(replies(conn.dup()), None)
        if request is None:
            return
        if "status" in request:
            send(conn, {"status": engine.status()})
        elif "stop" in request:
            engine.stopping.set()
            send(conn, {"stopping": os.getpid()})
        elif "run" in request:
            _run_request(engine, conn, request)
    finally:
        # Wakes the batch's watcher, blocked reading the connection (a close alone would not).
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
        conn.close()


def _take(lock: TextIO, place: EnginePlace, patience: float = 30.0) -> bool:
    """Take the place's lock; False if another engine holds it and answers (or keeps holding it:
    one starting). An engine that just died may hold it for a moment longer than its socket."""
    deadline = time.monotonic() + patience
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(str(place.socket)) == 0 or time.monotonic() > deadline:
                return False
        time.sleep(0.1)


def serve(
    place: EnginePlace, parallel: int, spark_conf: dict[str, str], ready: TextIO, runner: Runner
) -> int:
    """Hold the place's lock, build the session, answer requests until told to stop.

    Writes ``ready <pid>`` on ``ready`` once it answers (or ``running <pid>`` if another engine
    holds the place), then closes it.
    """
    from cdc_ingest.spark_session import build_session

    place.prepare()
    lock = place.lock.open("a")
    if not _take(lock, place):
        ready.write("running\n")
        ready.close()
        return 0
    place.socket.unlink(missing_ok=True)
    base = build_session(None, app_name="cdc-ingest-engine", extra_conf=spark_conf, long_lived=True)
    engine = Engine(base, parallel, runner)
    sys.stdout = _ThreadStreams(sys.stdout, "out", engine.sinks)
    sys.stderr = _ThreadStreams(sys.stderr, "err", engine.sinks)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o077)
    try:
        listener.bind(str(place.socket))
    finally:
        os.umask(previous)
    listener.listen(64)
    listener.settimeout(1.0)  # to notice a stop request between connections
    ready.write(f"ready {os.getpid()}\n")
    ready.close()
    handlers: list[threading.Thread] = []
    while not engine.stopping.is_set():
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        handler = threading.Thread(target=_handle, args=(engine, conn), daemon=True)
        handler.start()
        handlers = [h for h in handlers if h.is_alive()] + [handler]
    listener.close()
    place.socket.unlink(missing_ok=True)
    for handler in handlers:
        handler.join()
    base.stop()
    return 0


def run_engine(
    directory: str, parallel: int, config: str | None, master: str | None, runner: Runner
) -> int:
    """``cdc-ingest engine serve``: the engine in this process, until told to stop. Started by
    ``engine start``, stdout is a pipe to the starter, which gets one line; everything else
    (Spark's messages, a batch's output outside any request) goes to the engine's log."""
    from cdc_ingest.config import load_config

    if master:
        os.environ["SPARK_MASTER"] = master
    place = EnginePlace(Path(directory))
    place.prepare()
    ready = os.fdopen(os.dup(1), "w")
    with place.log.open("a") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    print(f"engine starting at {time.strftime('%Y-%m-%dT%H:%M:%S%z')} (pid {os.getpid()})")
    try:
        conf = load_config(config).spark.conf if config else {}
        return serve(place, max(1, parallel), dict(conf), ready, runner)
    except Exception as exc:
        ready.close()
        traceback.print_exc()
        print(f"engine failed to start: {exc}", flush=True)
        return 2
