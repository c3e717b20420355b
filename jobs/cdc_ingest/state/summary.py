"""What a run did, in numbers that add up: records read = messages + dead letters.

A record is one change as the source sent it: one per landed line, except for formats whose messages
carry several rows (Canal's ``data`` array), where each row is a record of its own.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

DDL_SAMPLES = 20


@dataclass
class TableSummary:
    """Changes to one mirrored table in one batch.

    ``messages`` = inserted + updated + deleted + deleted_absent + superseded + older
    + append_only_deletes + source_dropped + deletes_ignored (+ dead_lettered, which are counted
    apart from messages in the run totals).
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
    # A table without a key keeps every row image it receives; its deletes are skipped.
    append_only: bool = False
    append_only_deletes: int = 0
    # Changes to a table whose source was dropped (DROP TABLE/ERASE): not applied.
    source_dropped: int = 0
    # Updates that moved a row to another key: each also deletes its old key, and that delete's
    # outcome (deleted, delete of an absent key, superseded, older) is counted with the others.
    key_changes: int = 0
    # Deletes skipped because the table's deletes are ignored (``deletes: ignore``).
    deletes_ignored: int = 0
    # What the batch changed in the table's design (partition spec, write order, properties).
    design_changes: list[str] = field(default_factory=list)
    # Changes placed in the table's history (``history: scd2``), not counted in ``messages``,
    # and the history table's name (set for a keyless table too, which keeps none).
    history_changes: int = 0
    history_table: str | None = None
    # Each expectation's violations: rule -> {"on_violation": warn|drop|fail, "violations": n}.
    expectations: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class RunSummary:
    """One micro-batch of one pipeline."""

    pipeline: str
    batch_id: int | None = None
    resumed: bool = False
    files: list[str] = field(default_factory=list)
    duplicate_files: dict[str, str] = field(default_factory=dict)
    # Planned files left out of the batch, with why: deleted before they were read (``missing``),
    # or holding other bytes than when planned (``changed``: the next batch plans them again).
    missing_files: dict[str, str] = field(default_factory=dict)
    changed_files: dict[str, str] = field(default_factory=dict)
    # Files applied by an earlier batch whose size differs now (lines appended after they were
    # applied are not applied: land them in a new file).
    changed_after_applied: dict[str, str] = field(default_factory=dict)
    # New files left out because they could not be read (tried again next run), and entries
    # named like landed files that are no files (never read), each with why.
    unreadable_files: dict[str, str] = field(default_factory=dict)
    not_files: dict[str, str] = field(default_factory=dict)
    lines: int = 0
    records: int = 0  # = lines, except for multi-row messages
    messages: int = 0  # records decoded without error (applied, skipped or changing no row)
    dead_lettered: int = 0
    no_row_change: int = 0  # tombstones, heartbeats, transaction markers, DDL
    heartbeats: int = 0  # of those, heartbeats: a dead-letter alert must not fire on them
    ddl_recorded: int = 0  # DDL records kept in _cdc_ddl_history
    ddl_applied: int = 0  # of those, statements that changed a table
    ddl_rejected: int = 0  # statements not applied: unreadable, or narrowing a type
    ddl_outcomes: list[str] = field(default_factory=list)  # what became of each, in order
    ignored_values: int = 0  # changes with columns their table lacks (add_column: ignore)
    # Newest source event time (epoch ms) among the batch's good records, heartbeats included:
    # how fresh the mirror is once this batch is applied.
    freshness_ms: int | None = None
    already_applied: int = 0  # Kafka offsets applied by an earlier batch
    # Deletes naming no table (Aerospike deletes carry no set), and the tables they were aimed at.
    deletes_without_table: int = 0
    deletes_without_table_tables: list[str] = field(default_factory=list)
    tables: dict[str, TableSummary] = field(default_factory=dict)
    # Targets fed by source tables whose names differ only in case: they share one mirror.
    merged_sources: dict[str, list[str]] = field(default_factory=dict)
    dead_letter_samples: list[str] = field(default_factory=list)
    # Run options: a dry run writes nothing; ``only_tables`` applies those tables and leaves the
    # batch's files pending; ``max_files`` caps the new files planned (``deferred_files`` wait).
    dry_run: bool = False
    only_tables: list[str] = field(default_factory=list)
    skipped_tables: dict[str, str] = field(default_factory=dict)  # table -> why not applied
    skipped_table_messages: int = 0  # changes aimed at the tables this run does not apply
    # Messages of source tables the pipeline does not mirror (include_tables, exclude_tables).
    excluded_table_messages: int = 0
    max_files: int | None = None
    deferred_files: int = 0
    # A replay or rebuild batch: {"mode", the range or tables, "files_not_landed",
    # "files_not_applied_yet", "of_batches": {file: batch of its first application}}.
    replay: dict[str, Any] | None = None
    # {file, topic, partition, min_offset, max_offset, records} per file and topic partition.
    kafka_offsets: list[dict[str, Any]] = field(default_factory=list)
    started_at: str | None = None  # ISO 8601, UTC
    finished_at: str | None = None
    duration_s: float | None = None
    phase_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        """Whether only some tables were applied (the files stay pending for the others)."""
        return bool(self.only_tables)

    def add_ddl_outcomes(self, events: list[Any]) -> None:
        """Count and describe what became of the batch's DDL records (``DdlEvent`` objects)."""
        for event in events:
            status = event.status or "recorded"
            self.ddl_applied += status == "applied"
            self.ddl_rejected += status == "rejected"
            if len(self.ddl_outcomes) < DDL_SAMPLES:
                statement = " ".join(event.statement.split())[:100]
                self.ddl_outcomes.append(
                    f"{event.target or '?'}: {statement} -> {status}: {event.detail}"
                )

    def unaccounted(self) -> list[str]:
        """Where the counts do not add up; empty when every record's fate is counted once.

        Records = messages + dead letters; messages = changing no row + already applied + aimed
        at tables this run skips or the pipeline does not mirror + each table's messages (deletes
        naming no table count once, whichever tables they were aimed at); a table's messages =
        the sum of its fates.
        """
        problems: list[str] = []
        if self.records != self.messages + self.dead_lettered:
            problems.append(
                f"{self.records} records != {self.messages} messages + "
                f"{self.dead_lettered} dead-lettered"
            )
        aimed = len(self.deletes_without_table_tables)
        fates = (
            self.no_row_change
            + self.already_applied
            + self.skipped_table_messages
            + self.excluded_table_messages
            + sum(t.messages for t in self.tables.values())
            - (aimed - 1) * self.deletes_without_table
        )
        if fates != self.messages:
            problems.append(f"{self.messages} messages, {fates} fates counted")
        for t in [] if self.dry_run else sorted(self.tables.values(), key=lambda t: t.table):
            outcomes = (
                t.inserted
                + t.updated
                + t.deleted
                + t.deleted_absent
                + t.superseded
                + t.older
                + t.append_only_deletes
                + t.source_dropped
                + t.deletes_ignored
            )
            if outcomes != t.messages + t.key_changes:
                problems.append(
                    f"{t.table}: {t.messages} messages + {t.key_changes} key changes, "
                    f"{outcomes} outcomes counted"
                )
        return problems

    def to_json(self) -> str:
        """The summary as one JSON object (stored with the batch's checkpoint)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSummary:
        """The summary ``to_json`` wrote (``cdc-ingest run --json``'s last line)."""
        fields: dict[str, Any] = json.loads(text)
        tables = {name: TableSummary(**t) for name, t in fields.pop("tables", {}).items()}
        return cls(**fields, tables=tables)

    def _files(self, planned: bool = False) -> list[str]:
        """Summary lines of the files and entries not applied, each with why."""
        groups = (
            [
                ("left out, deleted after they were planned", self.missing_files),
                (
                    "left out, changed after they were planned (planned again next run)",
                    self.changed_files,
                ),
            ]
            if planned
            else []
        )
        groups += [
            (
                "changed after they were applied "
                + ("(the change is not applied)" if planned else "(not applied)"),
                self.changed_after_applied,
            ),
            ("left out, unreadable (planned again next run)", self.unreadable_files),
            ("named like landed files are no files (not read)", self.not_files),
        ]
        lines = []
        for title, files in groups:
            if files:
                lines.append(f"  {len(files)} files {title}:")
                lines += [f"    {uri}: {why}" for uri, why in sorted(files.items())]
        return lines

    def _message_notes(self) -> list[str]:
        """What the batch's messages held besides row changes: merged sources, duplicate files,
        messages that change no row, DDL, values and deletes left out."""
        lines: list[str] = []
        for target, names in sorted(self.merged_sources.items()):
            lines.append(
                f"  {target}: changes of {', '.join(names)} are applied to this one table "
                "(table names are compared without case)"
            )
        if self.duplicate_files:
            lines.append(f"  skipped {len(self.duplicate_files)} duplicate files:")
            lines += [
                f"    {dup} (same content as {orig})" for dup, orig in self.duplicate_files.items()
            ]
        if self.no_row_change or self.already_applied:
            lines.append(
                f"  {self.no_row_change} messages change no row (tombstone/control/DDL"
                + (f"; {self.heartbeats} heartbeats" if self.heartbeats else "")
                + "), "
                f"{self.already_applied} already applied (Kafka offsets)"
            )
        if self.excluded_table_messages:
            lines.append(
                f"  {self.excluded_table_messages} messages of source tables this pipeline does "
                "not mirror (include_tables, exclude_tables)"
            )
        if self.ddl_recorded:
            lines.append(
                f"  {self.ddl_recorded} DDL records kept in _cdc_ddl_history: "
                f"{self.ddl_applied} applied, {self.ddl_rejected} rejected"
            )
            lines += [f"    {outcome}" for outcome in self.ddl_outcomes]
        if self.ignored_values:
            lines.append(
                f"  {self.ignored_values} changes carried columns their table lacks: those values "
                "were not applied (schema_changes add_column: ignore)"
            )
        if self.deletes_without_table:
            aimed = ", ".join(self.deletes_without_table_tables) or "none yet"
            lines.append(
                f"  {self.deletes_without_table} deletes name no table: applied by key to "
                f"every table keyed like them ({aimed})"
            )
        return lines

    def render(self) -> str:
        """Human-readable summary for the CLI and the Airflow task log."""
        if self.batch_id is None:
            return "\n".join([f"pipeline {self.pipeline}: nothing new to apply", *self._files()])
        resumed = " (resumed)" if self.resumed else ""
        records = f" ({self.records} records)" if self.records != self.lines else ""
        head = (
            f"pipeline {self.pipeline} batch {self.batch_id}{resumed}: "
            f"{len(self.files)} files, {self.lines} lines{records} = {self.messages} messages + "
            f"{self.dead_lettered} dead-lettered"
        )
        lines = [head]
        lines += [f"  counts do not add up: {problem}" for problem in self.unaccounted()]
        if self.dry_run:
            lines.append(
                "  dry run: decoded and counted; no table, dead letter or checkpoint written"
            )
        if self.replay is not None:
            lines.append(f"  {_replay_line(self.replay)}")
        if self.only_tables:
            lines.append(
                f"  only tables {', '.join(self.only_tables)}: files stay pending for a full run"
            )
        lines += [f"  not applied: {t} ({why})" for t, why in sorted(self.skipped_tables.items())]
        if self.deferred_files:
            lines.append(
                f"  max files {self.max_files}: {self.deferred_files} new files left for later"
            )
        if self.freshness_ms is not None:
            fresh = datetime.fromtimestamp(self.freshness_ms / 1000, UTC)
            lines.append(f"  freshness: source events up to {fresh.isoformat()}")
        lines += self._files(planned=True)
        lines += self._message_notes()
        for name in sorted(self.tables):
            lines += _table_lines(name, self.tables[name], self.dry_run)
        for name in sorted(self.tables):
            lines += [f"    {name}: {line}" for line in _expectation_lines(self.tables[name])]
        if self.dead_letter_samples:
            lines.append(
                f"  dead letters ({self.dead_lettered}, first {len(self.dead_letter_samples)}):"
            )
            lines += [f"    {sample}" for sample in self.dead_letter_samples]
        return "\n".join(lines)


def _table_lines(name: str, t: TableSummary, dry_run: bool) -> list[str]:
    """What became of one table's messages, and the design changes made to it."""
    created = " (created)" if t.created else ""
    if t.source_dropped:
        return [
            f"  {name}: {t.messages} messages not applied: the source dropped the table "
            "(the mirror is kept; a CREATE TABLE of that name resumes it)"
        ]
    if dry_run:
        return [f"  {name}{' (would be created)' if t.created else ''}: {t.messages} changes"]
    if t.append_only:
        unkept = (
            "; no history kept (history: scd2 needs a key; every row image is appended here)"
            if t.history_table
            else ""
        )
        return [
            f"  {name}{created} (append-only: no key): {t.messages} messages -> appended "
            f"{t.inserted}; deletes skipped {t.append_only_deletes}; dead-lettered "
            f"{t.dead_lettered}{unkept}"
        ]
    notes = [f"; {t.key_changes} updates moved a row to another key" if t.key_changes else ""]
    notes.append(f"; deletes ignored {t.deletes_ignored}" if t.deletes_ignored else "")
    if t.history_table:
        notes.append(f"; {t.history_changes} changes placed in {t.history_table}")
    applied = (
        f"  {name}{created}: {t.messages} messages -> "
        f"inserted {t.inserted}, updated {t.updated}, deleted {t.deleted}; "
        f"skipped: superseded {t.superseded}, older {t.older}, "
        f"delete of absent key {t.deleted_absent}; dead-lettered {t.dead_lettered}"
    )
    return [applied + "".join(notes), *(f"    {name}: {c}" for c in t.design_changes)]


def _expectation_lines(table: TableSummary) -> list[str]:
    """One line per expectation of a table: how many changes violated it, and what became of
    them."""
    fates = {"warn": "applied", "drop": "dead-lettered", "fail": "stopped the table's batch"}
    return [
        f"expectation {rule}: {counted['violations']} changes violated it"
        + (f" ({fates[counted['on_violation']]})" if counted["violations"] else "")
        for rule, counted in sorted(table.expectations.items())
    ]


def _replay_line(replay: dict[str, Any]) -> str:
    """What a replay or rebuild batch re-applied, in one line."""
    if replay["mode"] == "rebuild":
        what = f"rebuild of {', '.join(replay['tables'])} from every applied file still landed"
    else:
        what = (
            f"replay of the applied files landed in [{replay['from'] or '-inf'}, "
            f"{replay['to'] or '+inf'}) by {replay['landed_at']}"
        )
    return (
        f"{what} (positions of their first batches kept); {replay['files_not_landed']} applied "
        f"files no longer landed, {replay['files_not_applied_yet']} files in range not applied "
        "yet (left to the next run)"
    )
