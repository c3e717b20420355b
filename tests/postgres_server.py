"""A throwaway PostgreSQL server from Debian's binaries, for tests that need a real catalog.

The server gets its own data directory under /tmp, listens on a free loopback port and keeps its
Unix socket inside the data directory, so it never meets a system cluster or another test run's.
PostgreSQL refuses to run as root: under root every server command runs as the ``postgres`` OS
user (created by Debian's ``postgresql`` package) through ``runuser``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BINARIES = "/usr/lib/postgresql/*/bin"
SERVER_USER = "postgres"
INSTALL_HINT = "apt-get install postgresql (make test does)"


def find_bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = [Path(d) for d in glob.glob(BINARIES) if (Path(d) / "initdb").is_file()]
    return max(found, key=lambda d: int(d.parent.name)) if found else None


def unavailable_reason() -> str | None:
    """Why no server can be started here, or None when one can."""
    if find_bin_dir() is None:
        return f"no PostgreSQL server binaries under {BINARIES}: {INSTALL_HINT}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and no {SERVER_USER!r} OS user to run the server as"
    return None


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """One running server: where it lives and how to reach it over TCP."""

    bin_dir: Path
    root: Path
    port: int
    host: str = "127.0.0.1"
    #: Extra server settings (``-c name=value``), e.g. ``wal_level=logical`` for Debezium.
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    def _as_server_user(self, *command: str) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", SERVER_USER, "--"] if os.geteuid() == 0 else []
        # cwd: the server user may not be allowed into the caller's working directory.
        done = subprocess.run(
            [*prefix, *command], cwd=self.root, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            log = self.log_file.read_text() if self.log_file.is_file() else ""
            shown = " ".join(command)
            shown = shown if len(shown) < 400 else shown[:400] + "..."
            raise RuntimeError(
                f"{shown} exited {done.returncode}:\n{done.stdout}{done.stderr}{log[-2000:]}"
            )
        return done

    def start(self) -> None:
        """initdb, then start and wait until the server accepts connections (pg_ctl -w)."""
        bin_dir = self.bin_dir
        # Local (socket) connections trust the server user, which creates the roles below;
        # TCP connections, which the pipelines use, must give a password.
        self._as_server_user(
            str(bin_dir / "initdb"),
            "--pgdata",
            str(self.data_dir),
            "--username",
            SERVER_USER,
            "--auth-local",
            "trust",
            "--auth-host",
            "scram-sha-256",
            "--encoding",
            "UTF8",
            "--no-sync",
        )
        options = (
            f"-c listen_addresses={self.host} -c port={self.port} "
            f"-c unix_socket_directories={self.data_dir} -c fsync=off"
        ) + "".join(f" -c {name}={value}" for name, value in self.settings)
        self._as_server_user(
            str(bin_dir / "pg_ctl"),
            "start",
            "-w",
            "-t",
            "60",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
            "-o",
            options,
        )

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended), waiting until it is down."""
        self._as_server_user(
            str(self.bin_dir / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(self.data_dir)
        )

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run one statement as the superuser over the Unix socket; returns psql's output."""
        done = self._as_server_user(
            str(self.bin_dir / "psql"),
            "-X",
            "-q",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-U",
            SERVER_USER,
            "-d",
            database,
            "-c",
            statement,
        )
        return done.stdout

    def create_database(self, name: str, owner: str, password: str) -> str:
        """A login role owning a new database; returns its ``postgresql://`` URI over TCP."""
        self.sql(f"CREATE ROLE {owner} LOGIN PASSWORD '{password}'")
        self.sql(f"CREATE DATABASE {name} OWNER {owner}")
        return f"postgresql://{owner}:{password}@{self.host}:{self.port}/{name}"


def start_server(settings: tuple[tuple[str, str], ...] = ()) -> PostgresServer:
    """A fresh server in a new directory under /tmp, owned by the server user.

    /tmp rather than pytest's tmp_path: pytest's base directory is private to the test user,
    and the server user must be able to reach its data directory.
    """
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise RuntimeError(f"no PostgreSQL server binaries: {INSTALL_HINT}")
    root = Path(tempfile.mkdtemp(prefix="cdc-ingest-pg-"))
    if os.geteuid() == 0:
        server_user = pwd.getpwnam(SERVER_USER)
        os.chown(root, server_user.pw_uid, server_user.pw_gid)
    server = PostgresServer(
        bin_dir=bin_dir, root=root, port=_free_loopback_port(), settings=settings
    )
    try:
        server.start()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return server


def remove_server(server: PostgresServer) -> None:
    """Stop the server and delete its directory."""
    try:
        server.stop()
    finally:
        shutil.rmtree(server.root, ignore_errors=True)


def serve_module() -> Iterator[PostgresServer]:
    """A test module's own server: the module is skipped where none can start; removed after."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    server = start_server()
    try:
        yield server
    finally:
        remove_server(server)
