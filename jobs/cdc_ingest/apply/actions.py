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
# With soft deletes, a delete whose key the batch upserted (newer than the table's row) before it:
# the row is written with that upsert's values and flagged, as two batches split between the
# upsert and the delete would leave it (``soft_deletes``). Counted as deleted.
DELETED_WRITTEN = "delete_written"
