"""Ingest and maintenance of one namespace never overlap: a shared/exclusive lock per namespace.

Ingest runs take the lock shared (pipelines writing one namespace still run side by side, their
commits reconciled by Iceberg), maintenance takes it exclusive: compaction, snapshot expiry and
orphan removal never run while a batch is between its table commits and its checkpoint.

The lock lives with the catalog, so it holds whoever starts the job (Airflow, a shell, cron):

- SQLite catalog: ``flock`` on ``<catalog.db>.<namespace>.lock`` beside the database file;
- PostgreSQL catalog: a session advisory lock in the catalog database;
- REST, Glue and Hive catalogs offer no lock this job can take, so none is taken: each commit is
  still checked by Iceberg against concurrent ones, and orphan removal deletes only files older
  than ``orphan_older_than``, far longer than a batch lives between its commits.

Both are released by the operating system or the server when the holding process dies, so a
killed job never leaves the namespace locked. A waiter polls until ``wait`` runs out, then fails
with a message naming the namespace and, for maintenance, who holds it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from cdc_ingest.catalog.config import CatalogConfig

POLL_SECONDS = 0.5


class NamespaceLocked(RuntimeError):
    """The namespace stayed locked by the other kind of job for longer than the wait."""


def _holder(purpose: str) -> str:
    started = datetime.now(UTC).isoformat(timespec="seconds")
    return f"{purpose} (pid {os.getpid()} on {socket.gethostname()}, since {started})"


def _refusal(catalog: CatalogConfig, namespace: str, purpose: str, wait: timedelta, by: str) -> str:
    return (
        f"namespace {catalog.name}.{namespace} is locked by {by}; {purpose} gave up waiting "
        f"after {wait.total_seconds():g} s (ingest and maintenance of a namespace never overlap)"
    )


@contextmanager
def _file_lock(
    catalog: CatalogConfig, namespace: str, exclusive: bool, wait: timedelta, purpose: str
) -> Iterator[None]:
    database = Path(catalog.uri[len("sqlite:///") :])
    path = database.parent / f"{database.name}.{namespace}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle: IO[str] = path.open("a+", encoding="utf-8")
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    deadline = time.monotonic() + wait.total_seconds()
    try:
        while True:
            try:
                fcntl.flock(handle, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.seek(0)
                    by = handle.read().strip() if not exclusive else ""
                    holder = by or ("maintenance" if not exclusive else "ingest runs")
                    raise NamespaceLocked(
                        _refusal(catalog, namespace, purpose, wait, holder)
                    ) from None
                time.sleep(POLL_SECONDS)
        if exclusive:
            # Only the exclusive holder writes who it is, for the waiters' messages.
            handle.seek(0)
            handle.truncate()
            handle.write(_holder(purpose))
            handle.flush()
        yield
    finally:
        handle.close()


def _advisory_key(catalog: CatalogConfig, namespace: str) -> int:
    digest = hashlib.sha256(f"cdc-ingest:{catalog.name}:{namespace}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def _advisory_lock(
    catalog: CatalogConfig, namespace: str, exclusive: bool, wait: timedelta, purpose: str
) -> Iterator[None]:
    from sqlalchemy import create_engine, text

    engine = create_engine(catalog.sqlalchemy_url, poolclass=_null_pool())
    suffix = "" if exclusive else "_shared"
    key = _advisory_key(catalog, namespace)
    deadline = time.monotonic() + wait.total_seconds()
    try:
        with engine.connect() as connection:
            while not connection.execute(
                text(f"SELECT pg_try_advisory_lock{suffix}(:key)"), {"key": key}
            ).scalar():
                if time.monotonic() >= deadline:
                    holder = "maintenance" if not exclusive else "ingest runs"
                    raise NamespaceLocked(_refusal(catalog, namespace, purpose, wait, holder))
                time.sleep(POLL_SECONDS)
            # Closing the connection (or the process dying) releases the lock.
            yield
    finally:
        engine.dispose()


def _null_pool() -> Any:
    from sqlalchemy.pool import NullPool

    return NullPool


@contextmanager
def namespace_lock(
    catalog: CatalogConfig, namespace: str, *, exclusive: bool, wait: timedelta, purpose: str
) -> Iterator[None]:
    """Hold the namespace's lock for the ``with`` block.

    Args:
        catalog: the catalog whose database (or database file) holds the lock.
        namespace: the namespace.
        exclusive: True for maintenance, False for an ingest run.
        wait: how long to wait for the other kind of job to finish.
        purpose: what is asking (``ingest``, ``maintenance``), for messages.

    Raises:
        NamespaceLocked: still locked when ``wait`` ran out.
    """
    if catalog.database is None:
        yield
        return
    acquire = _advisory_lock if catalog.database == "postgresql" else _file_lock
    with acquire(catalog, namespace, exclusive, wait, purpose):
        yield


class PipelineLocked(NamespaceLocked):
    """Another run of the same pipeline held it for longer than the wait."""


def _pipeline_refusal(pipeline: str, holder: str, wait: timedelta) -> str:
    return (
        f"pipeline {pipeline} is being applied by {holder or 'another run'}; this run gave up "
        f"waiting after {wait.total_seconds():g} s (one batch of a pipeline at a time)"
    )


@contextmanager
def _pipeline_file_lock(
    catalog: CatalogConfig, namespace: str, pipeline: str, wait: timedelta
) -> Iterator[None]:
    database = Path(catalog.uri[len("sqlite:///") :])
    name = hashlib.sha256(f"{namespace}\0{pipeline}".encode()).hexdigest()[:16]
    path = database.parent / f"{database.name}.pipeline-{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle: IO[str] = path.open("a+", encoding="utf-8")
    deadline = time.monotonic() + wait.total_seconds()
    try:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.seek(0)
                    holder = handle.read().strip()
                    raise PipelineLocked(_pipeline_refusal(pipeline, holder, wait)) from None
                time.sleep(POLL_SECONDS)
        handle.seek(0)
        handle.truncate()
        handle.write(_run_holder())
        handle.flush()
        yield
    finally:
        handle.close()


def _run_holder() -> str:
    started = datetime.now(UTC).isoformat(timespec="seconds")
    return f"pid {os.getpid()} on {socket.gethostname()} since {started}"


@contextmanager
def _pipeline_advisory_lock(
    catalog: CatalogConfig, namespace: str, pipeline: str, wait: timedelta
) -> Iterator[None]:
    from sqlalchemy import create_engine, text

    # The holder is told by the session's application_name (at most 63 bytes), which waiters
    # read from pg_stat_activity.
    holder = _run_holder().replace(" on ", "@")[:63]
    engine = create_engine(
        catalog.sqlalchemy_url,
        poolclass=_null_pool(),
        connect_args={"application_name": holder},
    )
    digest = hashlib.sha256(f"cdc-ingest-run:{catalog.name}:{namespace}:{pipeline}".encode())
    key = int.from_bytes(digest.digest()[:8], "big", signed=True)
    deadline = time.monotonic() + wait.total_seconds()
    try:
        with engine.connect() as connection:
            while not connection.execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": key}
            ).scalar():
                if time.monotonic() >= deadline:
                    # A bigint advisory key is shown as classid (high half) and objid (low half).
                    by = connection.execute(
                        text(
                            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a "
                            "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                            "AND l.classid = :hi AND l.objid = :lo AND l.objsubid = 1"
                        ),
                        {"hi": (key >> 32) & 0xFFFFFFFF, "lo": key & 0xFFFFFFFF},
                    ).scalar()
                    raise PipelineLocked(_pipeline_refusal(pipeline, by or "", wait))
                time.sleep(POLL_SECONDS)
            yield
    finally:
        engine.dispose()


@contextmanager
def pipeline_lock(
    catalog: CatalogConfig, namespace: str, pipeline: str, wait: timedelta
) -> Iterator[None]:
    """Hold the pipeline's run lock for the ``with`` block: one batch of a pipeline at a time.

    Two runs of one pipeline would plan the same files and race on ``_cdc_checkpoints``; the
    second waits up to ``wait`` and then gives up, naming the holder. Like the namespace lock it
    lives with a JDBC catalog's database (none is taken for REST, Glue or Hive catalogs; Airflow's
    ``max_active_runs=1`` still keeps one run per DAG).

    Raises:
        PipelineLocked: still held by another run when ``wait`` ran out.
    """
    if catalog.database is None:
        yield
        return
    acquire = _pipeline_advisory_lock if catalog.database == "postgresql" else _pipeline_file_lock
    with acquire(catalog, namespace, pipeline, wait):
        yield
