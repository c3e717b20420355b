"""What classification decides for each key of a batch (``_action``), read by the writes."""

from __future__ import annotations

INSERT, UPDATE, DELETED, DELETED_ABSENT, SUPERSEDED, OLDER = (
    "insert",
    "update",
    "delete",
    "delete_absent",
    "superseded",
    "older",
)
