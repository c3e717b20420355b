"""What a table's classification counts come to: its summary, the rows its write changes, the
tombstones it sets or clears, and the outcome its commits note (``commit_notes``). One definition
for a table applied alone (``keyed``) and for the groups (``groups``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc_ingest.apply.actions import (
    DELETED,
    DELETED_ABSENT,
    DELETED_WRITTEN,
    INSERT,
    OLDER,
    UPDATE,
)
from cdc_ingest.state.summary import TableSummary

if TYPE_CHECKING:
    from cdc_ingest.apply.classify import ActionCounts
    from cdc_ingest.schema.target import TargetTable

# What a table's summary says about its changes (dead letters come from the batch, not the table).
OUTCOMES = (
    "messages",
    "inserted",
    "updated",
    "deleted",
    "deleted_absent",
    "superseded",
    "older",
    "key_changes",
    "deletes_ignored",
)


def moves_held_tombstones(counts: ActionCounts) -> bool:
    """Whether a key the classification tombstones (a delete sets one, an insert clears one) had
    one already. Where none had, the MERGE into ``_cdc_tombstones`` would only insert, so the
    tombstones are appended instead, without its join of every tombstone the namespace holds:
    the common case of a stream, whose deletes are of keys deleted for the first time. A writer
    that set one of those keys' tombstones since the classification read them is the same race
    as for the first tombstones of a table, which are appended too."""
    tombstoning = (DELETED, DELETED_ABSENT, DELETED_WRITTEN, INSERT)
    return any(had and act in tombstoning and keys for (act, had), (keys, _) in counts.items())


def inserts_only(summary: TableSummary, target: TargetTable, moved_on: bool) -> bool:
    """Whether a table's classified changes only insert keys it does not hold, so that they are
    appended: the MERGE would join them with the table's rows to insert every one of them (a
    stream of new rows, an insert-only table, costs one append per batch, not a join of the
    table). Not where another writer committed to the table since the classification read it
    (the MERGE then compares orders again), nor with soft deletes, where an insert may revive a
    soft-deleted row. A writer that inserts one of those keys between this check and the
    append's commit is the race a table this run created has too, which is appended as well."""
    writes_held = summary.updated or summary.deleted or target.deletes == "soft"
    return bool(summary.inserted) and not writes_held and not moved_on


def table_summary(
    name: str, counts: ActionCounts, rows: int, ignored: int = 0, moved: int = 0
) -> TableSummary:
    """A table's outcomes from its classification's counts; the rest of its ``rows`` (the
    changes aimed at it) are dead letters."""
    by_action: dict[str, int] = {}
    for (act, _), (keys, _) in counts.items():
        by_action[act] = by_action.get(act, 0) + keys
    good = sum(n for _, n in counts.values())
    return TableSummary(
        table=name,
        messages=good + ignored - moved,
        key_changes=moved,
        deletes_ignored=ignored,
        inserted=by_action.get(INSERT, 0),
        updated=by_action.get(UPDATE, 0),
        deleted=by_action.get(DELETED, 0) + by_action.get(DELETED_WRITTEN, 0),
        deleted_absent=by_action.get(DELETED_ABSENT, 0),
        superseded=good - sum(by_action.values()),
        older=by_action.get(OLDER, 0),
        dead_lettered=rows - (good + ignored - moved),
    )


def outcome(summary: TableSummary, created: bool) -> dict[str, object]:
    """What a table's commit notes of its batch (``commit_notes.counts_properties``)."""
    return {f: getattr(summary, f) for f in OUTCOMES} | {"created": created}


def written_rows(summary: TableSummary, soft: bool, created: bool) -> int:
    """The rows a table's write changes: its inserts, updates and deletes, and with soft deletes
    the deletes of rows already flagged (their order moves on). A created table holds no row to
    flag: each of its soft deletes counted as deleted writes its upsert's row."""
    if created:
        return summary.inserted + (summary.deleted if soft else 0)
    written = summary.inserted + summary.updated + summary.deleted
    return written + (summary.deleted_absent if soft else 0)


def tombstoned(summary: TableSummary, counts: ActionCounts) -> int:
    """How many tombstones a table's classification sets (its deletes) or clears (its inserts of
    keys that had one)."""
    return summary.deleted + summary.deleted_absent + counts.get((INSERT, True), (0, 0))[0]
