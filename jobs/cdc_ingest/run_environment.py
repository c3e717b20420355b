"""The environment a batch reads its secrets and switches from.

A cold run's is its process's. A warm engine (:mod:`cdc_ingest.engine`) runs batches of many
callers in one process, each with the environment its caller sent (an Airflow task's resolved
connections, a shell's exports): the engine sets it for the batch's thread here, and every read
of a secret or switch goes through :func:`environ`, never ``os.environ`` directly.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

_CURRENT: ContextVar[Mapping[str, str] | None] = ContextVar("cdc_ingest_environ", default=None)


def environ() -> Mapping[str, str]:
    """The running batch's environment: its caller's under an engine, else this process's."""
    current = _CURRENT.get()
    return os.environ if current is None else current


@contextlib.contextmanager
def using(env: Mapping[str, str]) -> Iterator[None]:
    """Run the enclosed batch with ``env`` as its environment (in this thread only)."""
    token = _CURRENT.set(dict(env))
    try:
        yield
    finally:
        _CURRENT.reset(token)
