"""The Airflow connection that names the warm engine the DAGs' tasks send their batches to.

A generic connection (by default ``cdc_ingest_engine``, else the pipelines file's
``spark.engine_conn_id``) whose extra ``dir`` is the engine's directory
(``cdc-ingest engine start`` with ``CDC_INGEST_ENGINE_DIR`` set to it, on the Airflow host; its
driver there, its executors on the cluster with ``--master``)::

    AIRFLOW_CONN_CDC_INGEST_ENGINE='{"conn_type":"generic","extra":{"dir":"/srv/cdc/engine"}}'

The connection carries no secret: a batch's secrets travel inside its request, on a socket only
the engine's owner can open. Without the connection, the tasks use the engine of the workers'
own ``CDC_INGEST_ENGINE_DIR`` (or its default), as the CLI does.
"""

from __future__ import annotations

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
