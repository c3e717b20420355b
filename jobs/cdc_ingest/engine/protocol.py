"""The messages between a caller and an engine: one JSON object per line, each way.

A caller sends one request and reads replies until the last:

- ``{"run": [argv...], "env": {...}}``: run ``cdc-ingest <argv>`` (``run`` or ``maintain``) with
  the caller's environment (its secrets among it: the socket is its owner's only). Replies: any
  number of ``{"out": text}`` and ``{"err": text}`` (the batch's output, as written), then
  ``{"exit": status}``. A connection that ends before ``exit`` means the engine died.
- ``{"status": true}``: one reply, ``{"status": {...}}`` (pid, started, batches, memory).
- ``{"stop": true}``: one reply, ``{"stopping": pid}``; the engine finishes the batches it runs,
  then exits.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

# ``cdc-ingest`` asks its caller to run the batch cold: this engine cannot run it (a pipelines
# file with OpenLineage, whose Spark listener belongs to a driver of its own).
EXIT_RUN_COLD = 75


def send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall((json.dumps(message) + "\n").encode())


def replies(conn: socket.socket) -> Iterator[dict[str, Any]]:
    """The messages on ``conn`` until it closes."""
    with conn.makefile("r", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)
