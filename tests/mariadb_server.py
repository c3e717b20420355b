"""A throwaway MariaDB server from Debian's ``mariadb-server``, for the real-producer tests.

Its own data directory under /tmp, a free loopback port, a Unix socket in the directory, the
binary log in row format (what Debezium's MariaDB connector reads). Statements run through the
``mariadb`` client over the socket as root.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SERVER = "/usr/sbin/mariadbd"
INSTALL_DB = "/usr/bin/mariadb-install-db"
CLIENT = "/usr/bin/mariadb"
INSTALL_HINT = "apt-get install mariadb-server (make test does)"


def unavailable_reason() -> str | None:
    """Why no server can be started here, or None when one can."""
    missing = [p for p in (SERVER, INSTALL_DB, CLIENT) if not Path(p).is_file()]
    return f"missing {', '.join(missing)}: {INSTALL_HINT}" if missing else None


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class MariaDbServer:
    """One running server and how to reach it."""

    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    host: str = "127.0.0.1"

    @property
    def socket_path(self) -> Path:
        return self.root / "server.sock"

    def start(self) -> None:
        data = self.root / "data"
        user = ["--user=root"] if os.geteuid() == 0 else []
        subprocess.run(
            [
                INSTALL_DB,
                "--no-defaults",
                *user,
                f"--datadir={data}",
                "--skip-test-db",
                "--auth-root-authentication-method=normal",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        log = open(self.root / "server.log", "wb")  # noqa: SIM115 (the server's own log)
        self.process = subprocess.Popen(
            [
                SERVER,
                "--no-defaults",
                *user,
                f"--datadir={data}",
                f"--socket={self.socket_path}",
                f"--port={self.port}",
                f"--bind-address={self.host}",
                f"--log-bin={data / 'binlog'}",
                "--binlog-format=ROW",
                "--server-id=1",
                f"--pid-file={self.root / 'server.pid'}",
                "--innodb-flush-log-at-trx-commit=0",
                "--sync-binlog=0",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        # The client retries its connection until the server answers (or 60 s pass).
        done = subprocess.run(
            [
                "mariadb-admin",
                f"--socket={self.socket_path}",
                "-uroot",
                "--wait=60",
                "--connect-timeout=1",
                "ping",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"MariaDB did not start: {(self.root / 'server.log').read_text()}")

    def sql(self, statements: str, database: str = "") -> str:
        """Run statements as root over the socket; returns the client's tab-separated output."""
        command = [
            CLIENT,
            f"--socket={self.socket_path}",
            "-uroot",
            "--batch",
            "--raw",
            "--skip-column-names",
        ]
        done = subprocess.run(
            [*command, *([database] if database else [])],
            input=statements,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"mariadb exited {done.returncode}: {done.stderr}\n{statements}")
        return done.stdout

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=60)


def serve_module() -> Iterator[MariaDbServer]:
    """A test module's own server: the module is skipped where none can start; removed after."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    server = MariaDbServer(
        Path(tempfile.mkdtemp(prefix="cdc-ingest-mariadb-")), _free_loopback_port()
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
