"""The lake's state as plain data, for every reader: the job (rows Spark collected) and the Airflow
tasks and status page (rows pyiceberg scanned).

A pipeline's ``_cdc_checkpoints`` rows mean one thing, decided here once: :func:`checkpoint_state`
turns them into a :class:`CheckpointState` (what is committed, and the batch planned and not yet
committed, if any), and :func:`pending_work` says what the next run has to do for a listing of the
landing zone. :func:`open_catalog` is the one pyiceberg opener of the readers outside Spark. Plain
Python (and pyiceberg when a catalog is opened): no Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from cdc_ingest.catalog.config import CatalogConfig
from cdc_ingest.catalog.properties import pyiceberg_properties
from cdc_ingest.landing.zones import LandedFile
from cdc_ingest.run_environment import environ as run_environ

# Statuses of ``_cdc_checkpoints`` rows. A batch is planned (one ``planned`` row per file) before
# any table changes, and sealed by one append of its file rows and a ``committed`` row.
PLANNED, APPLIED, DUPLICATE, COMMITTED = "planned", "applied", "duplicate", "committed"
# A file a replay or rebuild batch applied again (its first application stays its ``applied`` row).
REPLAYED = "replayed"
# The columns :func:`checkpoint_state` reads.
CHECKPOINT_FIELDS = (
    "batch_id",
    "status",
    "file",
    "file_idx",
    "size",
    "fingerprint",
    "kafka_topic",
    "kafka_partition",
    "min_offset",
    "max_offset",
    "summary",
    "recorded_at",
)


@dataclass(frozen=True)
class OffsetRange:
    """Kafka offsets of one topic partition applied from one file."""

    topic: str
    partition: int
    min_offset: int
    max_offset: int


@dataclass
class CheckpointState:
    """Everything committed so far for one pipeline, and the batch awaiting its commit."""

    last_batch_id: int = 0  # the newest batch, committed or planned
    last_committed_batch_id: int | None = None
    last_committed_at: Any = None  # when the newest committed batch was sealed
    seen_files: set[str] = field(default_factory=set)
    fingerprints: dict[str, str] = field(default_factory=dict)
    offset_ranges: list[OffsetRange] = field(default_factory=list)
    duplicates: int = 0  # files committed as duplicates of an applied file
    pending: list[LandedFile] | None = None
    pending_batch_id: int | None = None
    # The pending batch's replay header and the original (batch, file_idx) of each of its files,
    # when it is a replay or rebuild (see ``run.modes``).
    pending_replay: dict[str, Any] | None = None
    pending_origins: list[tuple[int, int]] = field(default_factory=list)
    # Every committed applied file: its first application's (batch, file_idx), size, fingerprint.
    applied: dict[str, tuple[int, int, int | None, str | None]] = field(default_factory=dict)


def checkpoint_state(rows: Iterable[Mapping[str, Any]]) -> CheckpointState:
    """A pipeline's checkpoint state from its ``_cdc_checkpoints`` rows.

    Args:
        rows: the pipeline's rows, with (at least) the columns the caller needs of
            :data:`CHECKPOINT_FIELDS`: ``batch_id``, ``status`` and ``file`` always; a column
            missing from every row leaves what depends on it empty.
    """
    rows = list(rows)
    state = CheckpointState()
    committed = {r["batch_id"]: r.get("recorded_at") for r in rows if r["status"] == COMMITTED}
    if committed:
        state.last_committed_batch_id = max(committed)
        state.last_committed_at = committed[state.last_committed_batch_id]
    planned: dict[int, list[Mapping[str, Any]]] = {}
    for r in rows:
        batch_id, status = r["batch_id"], r["status"]
        state.last_batch_id = max(state.last_batch_id, batch_id)
        if status == PLANNED and batch_id not in committed:
            planned.setdefault(batch_id, []).append(r)
        if batch_id not in committed:
            continue
        if status == DUPLICATE:
            state.duplicates += 1
        if status == APPLIED:
            first = state.applied.get(r["file"])
            if first is None or batch_id < first[0]:
                state.applied[r["file"]] = (
                    batch_id,
                    r.get("file_idx") or 0,
                    r.get("size"),
                    r.get("fingerprint"),
                )
            if r.get("fingerprint"):
                state.fingerprints.setdefault(r["fingerprint"], r["file"])
            if r.get("kafka_topic") is not None:
                state.offset_ranges.append(
                    OffsetRange(
                        r["kafka_topic"], r["kafka_partition"], r["min_offset"], r["max_offset"]
                    )
                )
        if status in (APPLIED, DUPLICATE):
            state.seen_files.add(r["file"])
    if planned:
        batch_id = max(planned)
        files = sorted(planned[batch_id], key=lambda r: r.get("file_idx") or 0)
        state.pending_batch_id = batch_id
        state.pending = [
            LandedFile(r["file"], int(r.get("size") or 0), r.get("fingerprint")) for r in files
        ]
        notes = [json.loads(r["summary"]) if r.get("summary") else None for r in files]
        if notes and notes[0] is not None and "replay" in notes[0]:
            state.pending_replay = notes[0]["replay"]
            state.pending_origins = [(n["of_batch"], n["of_file_idx"]) for n in notes if n]
    return state


@dataclass(frozen=True)
class PendingWork:
    """What the next run of a pipeline has to do.

    Attributes:
        files: landed URIs no committed batch applied, in landing order (a file landing again
            under a new name counts here; the run then records it as a duplicate).
        resumes_batch: the planned batch the next run resumes first, if any.
    """

    files: list[str]
    resumes_batch: int | None

    @property
    def any(self) -> bool:
        """Whether a run has something to do."""
        return bool(self.files) or self.resumes_batch is not None


def pending_work(landed: Iterable[str], state: CheckpointState) -> PendingWork:
    """The landed files no committed batch applied, and the batch a run resumes first."""
    files = [uri for uri in landed if uri not in state.seen_files]
    return PendingWork(files, state.pending_batch_id)


class CatalogMissing(RuntimeError):
    """A SQLite catalog file that does not exist yet: no batch has run."""


def open_catalog(catalog: CatalogConfig, environ: Mapping[str, str] | None = None) -> Any:
    """The pyiceberg catalog for ``catalog``: the one opener of every reader outside Spark.

    Never creates a catalog database: a SQLite file that does not exist is reported instead (a
    SQL catalog's own two tables are created in an existing database, as the job would).

    Args:
        catalog: the pipelines file's catalog.
        environ: where secrets come from (default: this process's environment).

    Raises:
        CatalogMissing: a SQLite catalog file that does not exist.
    """
    from pyiceberg.catalog import load_catalog

    if catalog.database == "sqlite":
        path = Path(unquote(urlparse(catalog.uri).path))
        if not path.is_file():
            raise CatalogMissing(f"catalog database {path} does not exist (no batch has run yet?)")
    props = pyiceberg_properties(catalog, run_environ() if environ is None else environ)
    return load_catalog(catalog.name, **props)


def pipeline_rows(
    catalog: Any,
    namespace: str,
    table: str,
    pipeline: str,
    fields: tuple[str, ...],
    where: str = "",
) -> list[dict[str, Any]] | None:
    """A pipeline's rows of a system table (pyiceberg), optionally only those matching ``where``
    (a pyiceberg row filter); None if the table does not exist yet."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        loaded = catalog.load_table((namespace, table))
    except (NoSuchTableError, NoSuchNamespaceError):
        return None
    from cdc_ingest.state.appended_rows import rows_since

    # Pipeline names are [a-z0-9_]+ (checked when the config loads): safe inside quotes.
    row_filter = f"pipeline == '{pipeline}'" + (f" and {where}" if where else "")
    return rows_since(loaded, fields, row_filter)
