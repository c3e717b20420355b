"""What a run did, in numbers that add up: lines read = messages + dead letters."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass
class TableSummary:
    """Changes to one mirrored table in one batch.

    ``messages`` = inserted + updated + deleted + deleted_absent + superseded + older
    (+ dead_lettered, which are counted apart from messages in the run totals).
    """

    table: str
    messages: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    deleted_absent: int = 0  # deletes of keys not in the table (remembered as tombstones)
    superseded: int = 0  # collapsed into a newer change to the same key in this batch
    older: int = 0  # older than what the table (or a tombstone) already holds
    dead_lettered: int = 0
    created: bool = False


@dataclass
class RunSummary:
    """One micro-batch of one pipeline."""

    pipeline: str
    batch_id: int | None = None
    resumed: bool = False
    files: list[str] = field(default_factory=list)
    duplicate_files: dict[str, str] = field(default_factory=dict)
    lines: int = 0
    messages: int = 0
    dead_lettered: int = 0
    no_row_change: int = 0  # tombstones, heartbeats, transaction markers, DDL
    already_applied: int = 0  # Kafka offsets applied by an earlier batch
    tables: dict[str, TableSummary] = field(default_factory=dict)
    dead_letter_samples: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        """The summary as one JSON object (stored with the batch's checkpoint)."""
        return json.dumps(asdict(self), sort_keys=True)

    def render(self) -> str:
        """Human-readable summary for the CLI and the Airflow task log."""
        if self.batch_id is None:
            return f"pipeline {self.pipeline}: nothing new to apply"
        resumed = " (resumed)" if self.resumed else ""
        head = (
            f"pipeline {self.pipeline} batch {self.batch_id}{resumed}: "
            f"{len(self.files)} files, {self.lines} lines = {self.messages} messages + "
            f"{self.dead_lettered} dead-lettered"
        )
        lines = [head]
        if self.duplicate_files:
            lines.append(f"  skipped {len(self.duplicate_files)} duplicate files:")
            lines += [
                f"    {dup} (same content as {orig})" for dup, orig in self.duplicate_files.items()
            ]
        if self.no_row_change or self.already_applied:
            lines.append(
                f"  {self.no_row_change} messages change no row (tombstone/control/DDL), "
                f"{self.already_applied} already applied (Kafka offsets)"
            )
        for name in sorted(self.tables):
            t = self.tables[name]
            lines.append(
                f"  {name}{' (created)' if t.created else ''}: {t.messages} messages -> "
                f"inserted {t.inserted}, updated {t.updated}, deleted {t.deleted}; "
                f"skipped: superseded {t.superseded}, older {t.older}, "
                f"delete of absent key {t.deleted_absent}; dead-lettered {t.dead_lettered}"
            )
        if self.dead_letter_samples:
            lines.append(
                f"  dead letters ({self.dead_lettered}, first {len(self.dead_letter_samples)}):"
            )
            lines += [f"    {sample}" for sample in self.dead_letter_samples]
        return "\n".join(lines)
