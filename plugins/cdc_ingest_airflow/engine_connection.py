"""The Airflow connection that names the warm engine the DAGs' tasks send their batches to.

A generic connection (by default ``cdc_ingest_engine``, else the pipelines file's
``spark.engine_conn_id``) whose extra ``dir`` is the engine's directory
(``cdc-ingest engine start`` with ``CDC_INGEST_ENGINE_DIR`` set to it, on the Airflow host; its
driver there, its executors on the cluster with ``--master``)::

    AIRFLOW_CONN_CDC_INGEST_ENGINE='{"conn_type":"generic","extra":{"dir":"/srv/cdc/engine"}}'

The connection carries no secret: a batch's secrets travel inside its request, on a socket only
the engine's owner can open. Without the connection, the tasks use the engine of the workers'
own ``CDC_INGEST_ENGINE_DIR`` (or its default), as the CLI does.

:func:`run_on_engine` relays a task's command to that engine, its output in the task's log.
"""

from __future__ import annotations

import os
from typing import Any

from cdc_ingest.engine.place import ENGINE_DIR_VARIABLE


class EngineConnectionError(RuntimeError):
    """The engine's connection is defined but names no directory."""


def engine_environment(conn_id: str) -> dict[str, str]:
    """``{CDC_INGEST_ENGINE_DIR: dir}`` from connection ``conn_id``; empty if it is not defined.

    Raises:
        EngineConnectionError: the connection exists without an extra ``dir``.
    """
    from airflow.sdk import BaseHook

    try:
        conn: Any = BaseHook.get_connection(conn_id)
    except Exception:  # not defined: the workers' own setting decides
        return {}
    directory = (conn.extra_dejson or {}).get("dir") or conn.host
    if not directory:
        raise EngineConnectionError(
            f"Airflow connection {conn_id!r} (the warm engine) names no directory: "
            'set its extra {"dir": "<the engine\'s CDC_INGEST_ENGINE_DIR>"}'
        )
    return {ENGINE_DIR_VARIABLE: str(directory)}


def run_on_engine(conn_id: str | None, args: list[str], env: dict[str, str], log: Any) -> bool:
    """Run the job's command ``args`` on the warm engine if one answers (``cdc_ingest.engine``),
    its output in the task's ``log``; False if none does (or it asks for spark-submit: lineage).

    Raises:
        AirflowException: the engine ran the command and it failed (its last error line).
    """
    from airflow.sdk.exceptions import AirflowException
    from cdc_ingest.engine.client import relay_run

    named = engine_environment(conn_id) if conn_id else {}
    errors: list[str] = []
    out, err = _LogLines(log.info), _LogLines(log.warning, errors)
    status = relay_run(args, {**os.environ, **env, **named}, out, err)
    out.flush()
    err.flush()
    if status is None:
        if named:
            log.warning(
                "the warm engine of connection %s (%s) does not answer: spark-submit instead",
                conn_id,
                next(iter(named.values())),
            )
        return False
    log.info("ran on the warm engine (cdc-ingest engine status shows it)")
    if status != 0:
        reason = errors[-1] if errors else f"exit status {status}"
        raise AirflowException(f"cdc-ingest on the warm engine failed: {reason}")
    return True


class _LogLines:
    """Output relayed in chunks, logged a whole line at a time (and kept, if asked)."""

    def __init__(self, log: Any, kept: list[str] | None = None) -> None:
        self._log, self._kept, self._partial = log, kept, ""

    def __call__(self, text: str) -> None:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._emit(line)

    def flush(self) -> None:
        if self._partial:
            self._emit(self._partial)
            self._partial = ""

    def _emit(self, line: str) -> None:
        self._log("%s", line)
        if self._kept is not None and line.strip():
            self._kept.append(line)
