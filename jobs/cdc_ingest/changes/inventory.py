"""A batch's decoded records and its first pass: counts, target tables, file statistics."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, Row

from cdc_ingest import sql_text
from cdc_ingest.changes.resolve import BATCH_TEXT
from cdc_ingest.contract import DDL, DELETE, DUPLICATE, EXCLUDED, NOOP, UPSERT
from cdc_ingest.schema.inference import IMAGE_SAMPLE, SAMPLE_COLUMN
from cdc_ingest.schema.target import TargetInventory
from cdc_ingest.sql_text import literal
from cdc_ingest.state.summary import RunSummary


@dataclass(frozen=True)
class Batch:
    """One batch's decoded records.

    Attributes:
        batch_id: the batch.
        resolved: every record, decoded (not cached: reading it re-reads and re-parses the files).
        cached: the columns the rest of the job needs, cached; ``raw`` only for decode errors.
        existing: tables of the namespace when the run started.
        catalog: the catalog.
        namespace: the pipeline's namespace.
    """

    batch_id: int
    resolved: DataFrame
    cached: DataFrame
    existing: set[str]
    catalog: str
    namespace: str
    # Each file's landing time (epoch millis, None where it cannot be told), by _cdc_file_idx.
    landed_ms: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class Inventory:
    """The batch's target tables and how many changes each receives."""

    tables: dict[str, TargetInventory]
    rows: dict[str, int]
    # Deletes that name no table, and their key columns: they apply to every table keyed so.
    tableless_deletes: int = 0
    tableless_keys: tuple[str, ...] = ()
    # Tables with before halves of two-message updates in the batch (see update_images).
    before_halves: set[str] = field(default_factory=set)
    # Images type inference may sample, per table and file (see ``schema.inference``).
    sampled: dict[str, dict[int, int]] = field(default_factory=dict)


@dataclass
class FileStats:
    """Records per file and, for Kafka envelopes, offsets per file and topic partition."""

    records: dict[int, int] = field(default_factory=dict)
    ranges: dict[tuple[int, str, int], list[int]] = field(default_factory=dict)

    def add(self, row: Row) -> None:
        """Fold in one inventory row."""
        idx = row["_cdc_file_idx"]
        self.records[idx] = self.records.get(idx, 0) + row["count"]
        if row["kafka_topic"] is None or row["lo"] is None:
            return
        part = (idx, row["kafka_topic"], row["kafka_partition"])
        lo, hi, n = self.ranges.get(part, [row["lo"], row["hi"], 0])
        self.ranges[part] = [min(lo, row["lo"]), max(hi, row["hi"]), n + row["count"]]

    def offsets(self) -> list[tuple[int, str, int, int, int, int]]:
        """(file_idx, topic, partition, min_offset, max_offset, records) per file and partition."""
        return [(i, t, p, lo, hi, n) for (i, t, p), (lo, hi, n) in self.ranges.items()]


def cached_columns(
    resolved: DataFrame,
    unavailable_values: tuple[str, ...] = (),
    before_half_ops: tuple[str, ...] = (),
) -> DataFrame:
    """The columns to cache: what inventory, apply, dead letters and file stats read.

    With ``unavailable_values`` (the format's placeholders for values not sent), records whose
    text holds one are flagged, so that only their tables pay for keeping stored values; with
    ``before_half_ops``, the before halves of two-message updates are flagged.
    """
    before_half = "false"
    if before_half_ops:
        before_half = f"upper(op) IN ({', '.join(literal(op) for op in before_half_ops)})"
    unavailable = " OR ".join(
        ["false", *(f"contains(value, {literal(p)})" for p in unavailable_values)]
    )
    return sql_text.select(
        resolved,
        [
            "_cdc_file_idx",
            "_cdc_line",
            "kafka_topic",
            "kafka_partition",
            "kafka_offset",
            "op",
            "image",
            "key_values",
            "row_in_message",
            "event_ms",
            "ddl",
            "schema_hint",
            "_cdc_kind",
            "_cdc_target",
            "_cdc_source",
            "_cdc_keys",
            "_cdc_key",
            "_cdc_order",
            "_cdc_error",
            BATCH_TEXT,
            "_cdc_old_key",
            "_cdc_old_key_values",
            "CASE WHEN _cdc_error IS NOT NULL THEN raw END AS raw",
            # A statement's table is named with the message's database and schema (a statement
            # naming none is the message's table's).
            f"CASE WHEN _cdc_kind = {literal(DDL)} THEN array(src_db, src_schema, src_table) END"
            " AS _cdc_ddl_scope",
            IMAGE_SAMPLE,
            f"({unavailable}) AS _cdc_unavailable",
            f"({before_half}) AS _cdc_before_half",
        ],
    )


# Every format's name of a heartbeat (a record that only says the source is alive, and when).
HEARTBEAT_OPS = "'HEARTBEAT', 'MHEARTBEAT'"


def take_inventory(batch: Batch, summary: RunSummary, stats: FileStats) -> Inventory:
    """Count the batch and list its target tables, in one pass that also caches the batch."""
    inventory_rows = _inventory_rows(batch)
    inventories: dict[str, TargetInventory] = {}
    rows: dict[str, int] = {}
    tableless, tableless_keys = 0, tuple[str, ...]()
    sources: dict[str, set[str]] = {}
    before_halves: set[str] = set()
    sampled: dict[str, dict[int, int]] = {}
    for row in inventory_rows:
        stats.add(row)
        if not _counted(row, summary):
            continue
        if row["sampled_for"] is not None:
            files = sampled.setdefault(row["sampled_for"], {})
            files[row["_cdc_file_idx"]] = files.get(row["_cdc_file_idx"], 0) + row["count"]
        if row["before_half_of"]:
            before_halves.add(row["before_half_of"])
        if row["target"] is None:
            if row["_cdc_kind"] == DELETE and row["keys"] is not None:
                tableless += row["count"]
                tableless_keys = tuple(row["keys"])
            continue
        rows[row["target"]] = rows.get(row["target"], 0) + row["count"]
        sources.setdefault(row["target"], set()).add(row["source"] or "")
        inv = inventories.setdefault(row["target"], TargetInventory(row["target"]))
        inv.keys = inv.keys or tuple(row["keys"])
        inv.unavailable = inv.unavailable or row["unavailable"]
        inv.moves_keys = inv.moves_keys or row["moves_key"]
        inv.add_columns(list(row["columns"] or []))
        if row["hint"] is not None and row["hint"] not in inv.hints:
            inv.hints.append(row["hint"])
    summary.deletes_without_table = tableless
    summary.merged_sources = _case_merges(sources)
    return Inventory(inventories, rows, tableless, tableless_keys, before_halves, sampled)


def _inventory_rows(batch: Batch) -> list[Row]:
    """The batch's messages grouped by what the inventory counts of them: one job, which also
    caches the batch."""
    ok = "_cdc_error IS NULL"
    is_change = f"({ok} AND _cdc_kind IN ({literal(UPSERT)}, {literal(DELETE)}))"
    return sql_text.aggregate(
        batch.cached,
        [
            "_cdc_file_idx",
            "kafka_topic",
            "kafka_partition",
            "_cdc_kind",
            f"{ok} AS ok",
            f"CASE WHEN {is_change} THEN _cdc_target END AS target",
            f"CASE WHEN {is_change} THEN _cdc_keys END AS keys",
            f"CASE WHEN {is_change} THEN map_keys(image) END AS columns",
            f"CASE WHEN {is_change} THEN schema_hint END AS hint",
            f"CASE WHEN {is_change} THEN _cdc_source END AS source",
            f"({is_change} AND _cdc_unavailable) AS unavailable",
            f"({is_change} AND _cdc_old_key IS NOT NULL) AS moves_key",
            f"CASE WHEN {ok} AND _cdc_before_half THEN _cdc_target END AS before_half_of",
            f"CASE WHEN {ok} AND {SAMPLE_COLUMN} IS NOT NULL THEN _cdc_target END AS sampled_for",
            "(row_in_message = 0) AS first_row",
            f"({ok} AND _cdc_kind = {literal(NOOP)} AND upper(op) IN ({HEARTBEAT_OPS}))"
            " AS heartbeat",
        ],
        [
            "count(1) AS count",
            "min(kafka_offset) AS lo",
            "max(kafka_offset) AS hi",
            f"max(CASE WHEN {ok} THEN event_ms END) AS newest",
        ],
    ).collect()


def _counted(row: Row, summary: RunSummary) -> bool:
    """Count a group of messages in the summary; whether they are messages (not dead letters)."""
    summary.records += row["count"]
    if row["first_row"]:
        summary.lines += row["count"]
    if row["newest"] is not None:
        summary.freshness_ms = max(summary.freshness_ms or 0, row["newest"])
    if not row["ok"]:
        summary.dead_lettered += row["count"]
        return False
    summary.messages += row["count"]
    if row["_cdc_kind"] in (NOOP, DDL):
        summary.no_row_change += row["count"]
    if row["heartbeat"]:
        summary.heartbeats += row["count"]
    if row["_cdc_kind"] == DDL:
        summary.ddl_recorded += row["count"]
    elif row["_cdc_kind"] == DUPLICATE:
        summary.already_applied += row["count"]
    elif row["_cdc_kind"] == EXCLUDED:
        summary.excluded_table_messages += row["count"]
    return True


def _case_merges(sources: dict[str, set[str]]) -> dict[str, list[str]]:
    """Targets fed by source tables whose names differ only in case (or in characters the name
    rules replace): ``Users`` and ``users`` are one mirror, which the summary says."""
    merged: dict[str, list[str]] = {}
    for target, names in sources.items():
        if len(names) < 2:
            continue
        folded: dict[str, list[str]] = {}
        for name in names:
            folded.setdefault(re.sub(r"[^\w.]", "_", name.lower()), []).append(name)
        clashes = sorted(n for group in folded.values() if len(group) > 1 for n in group)
        if clashes:
            merged[target] = clashes
    return merged
