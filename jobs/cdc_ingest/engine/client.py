"""What a caller of the warm engine does: send it a run, or start, inspect and stop it."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from cdc_ingest.engine.place import EnginePlace, engine_place, engine_wanted
from cdc_ingest.engine.protocol import EXIT_RUN_COLD, replies, send
from cdc_ingest.run_environment import using

EXIT_OK, EXIT_ENGINE_FAILED, EXIT_NOT_RUNNING = 0, 2, 3


def _connect(place: EnginePlace) -> socket.socket | None:
    """A connection to the place's engine, or None if none answers (none started, or a dead
    one's socket left behind)."""
    if not place.socket.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(place.socket))
    except OSError:
        conn.close()
        return None
    return conn


def run_on_engine(argv: list[str]) -> int | None:
    """Run ``cdc-ingest <argv>`` on the engine and relay its output; its exit status, or None
    when no engine answers or it asks for a cold run (the caller then runs it itself)."""
    return relay_run(argv, dict(os.environ), _write(sys.stdout), _write(sys.stderr))


def _write(stream: TextIO) -> Callable[[str], None]:
    def write(text: str) -> None:
        stream.write(text)
        stream.flush()

    return write


def relay_run(
    argv: list[str],
    env: Mapping[str, str],
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int | None:
    """Send a run to the engine of ``env`` (``CDC_INGEST_ENGINE_DIR``) with ``env`` as the
    batch's environment; its output goes to ``out`` and ``err`` as written. Its exit status, or
    None when no engine answers, ``env`` says ``CDC_INGEST_ENGINE=off``, or the engine asks for
    a cold run."""
    with using(env):
        if not engine_wanted():
            return None
        place = engine_place()
    conn = _connect(place)
    if conn is None:
        return None
    with conn:
        send(conn, {"run": argv, "env": dict(env), "cwd": os.getcwd()})
        for message in replies(conn):
            if "out" in message:
                out(message["out"])
            elif "err" in message:
                err(message["err"])
            elif "exit" in message:
                status = int(message["exit"])
                return None if status == EXIT_RUN_COLD else status
    err(
        f"cdc-ingest: error: the warm engine in {place.directory} stopped during the batch "
        "(its log: engine.log there); nothing it had not committed is applied, and a rerun "
        "resumes the batch\n"
    )
    return EXIT_ENGINE_FAILED


def engine_status(place: EnginePlace) -> dict[str, Any] | None:
    conn = _connect(place)
    if conn is None:
        return None
    with conn:
        send(conn, {"status": True})
        for message in replies(conn):
            status: dict[str, Any] = message["status"]
            return status
    return None


def start_engine(
    place: EnginePlace, parallel: int, config: str | None, master: str | None = None
) -> int:
    """Start an engine in the background and return once it answers, or find the one running."""
    running = engine_status(place)
    if running is not None:
        print(f"engine already running in {place.directory} (pid {running['pid']})")
        return EXIT_OK
    place.prepare()
    command = [sys.executable, "-m", "cdc_ingest.cli", "engine", "serve"]
    command += ["--dir", str(place.directory)]
    command += ["--parallel", str(parallel)]
    if config:
        command += ["--config", os.path.abspath(config)]
    if master:
        command += ["--master", master]
    # Its own session: a terminal's Ctrl-C or a finished Airflow task does not stop it.
    starting = subprocess.Popen(
        command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True
    )
    assert starting.stdout is not None
    answer = starting.stdout.readline().split()
    starting.stdout.close()
    if answer[:1] == ["ready"]:
        print(f"engine started in {place.directory} (pid {answer[1]}); its log: {place.log}")
        return EXIT_OK
    if answer[:1] == ["running"]:
        starting.wait()
        running = engine_status(place)
        pid = running["pid"] if running else "?"
        print(f"engine already running in {place.directory} (pid {pid})")
        return EXIT_OK
    starting.wait()
    tail = (
        place.log.read_text(errors="replace").strip().splitlines()[-1:]
        if place.log.exists()
        else []
    )
    reason = tail[0] if tail else f"exit status {starting.returncode}"
    print(
        f"cdc-ingest: error: the engine did not start: {reason} (log: {place.log})", file=sys.stderr
    )
    return EXIT_ENGINE_FAILED


def stop_engine(place: EnginePlace) -> int:
    """Ask the engine to stop and return once its process is gone."""
    conn = _connect(place)
    if conn is None:
        print(f"no engine running in {place.directory}")
        return EXIT_OK
    with conn:
        send(conn, {"stop": True})
        answer = next(replies(conn), {})
    place.wait_released()
    print(f"engine stopped (pid {answer.get('stopping', '?')})")
    return EXIT_OK


def engine_command(args: argparse.Namespace) -> int:
    """``cdc-ingest engine start|status|stop``."""
    place = engine_place()
    if args.action == "start":
        return start_engine(place, args.parallel, args.config, args.master)
    if args.action == "stop":
        return stop_engine(place)
    status = engine_status(place)
    if status is None:
        print(f"no engine running in {place.directory}")
        return EXIT_NOT_RUNNING
    since = datetime.fromtimestamp(status["started"], UTC).isoformat(timespec="seconds")
    print(
        f"engine running in {place.directory}: pid {status['pid']}, since {since}, "
        f"Spark {status['spark']} on {status['master']}, {status['batches']} batches done, "
        f"{status['running']} running (at most {status['parallel']} at once), "
        f"{status['rss_bytes'] / 2**20:.0f} MiB resident, {status['loaded_classes']} classes"
    )
    return EXIT_OK
