"""Which files and Kafka offsets a pipeline has applied, kept in its ``_cdc_checkpoints`` table.

A batch is a write-ahead plan: its file list is committed (status ``planned``) before any table is
touched, and one append of ``applied``/``duplicate`` rows plus a ``committed`` row seals it. A run
that dies in between finds the plan and re-applies exactly those files under the same batch id;
the ordering guards of ``apply`` make the second application a no-op for what already landed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cdc_ingest.landing.planned_files import FileCheck
from cdc_ingest.landing.zones import LandedFile, fingerprinted
from cdc_ingest.state.lake import (
    APPLIED,
    CHECKPOINT_FIELDS,
    COMMITTED,
    DUPLICATE,
    PLANNED,
    REPLAYED,
    CheckpointState,
    checkpoint_state,
)
from cdc_ingest.state.tables import CHECKPOINTS, SYSTEM_TABLES, qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.writers.protocol import TableWriter


@dataclass
class BatchPlan:
    """The files one batch applies, in landing order, and the duplicates it skips."""

    batch_id: int
    files: list[LandedFile]
    duplicates: dict[str, str] = field(default_factory=dict)
    resumed: bool = False
    deferred: int = 0  # new files left for a later batch by ``max_files``
    # Applied files listed with another size now: what was appended is not applied.
    changed_after_applied: dict[str, str] = field(default_factory=dict)
    # New files that could not be read to fingerprint them, with why: left out, planned again
    # by the next batch.
    unreadable: dict[str, str] = field(default_factory=dict)
    # A replay or rebuild: what it is (kept with each planned row) and, per file, the batch and
    # file index of its first application, which its changes keep as their landing position.
    replay: dict[str, Any] | None = None
    origins: list[tuple[int, int]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Nothing to apply and nothing to record."""
        return not self.files and not self.duplicates


class CheckpointStore:
    """Reads and writes one pipeline's rows of ``<namespace>._cdc_checkpoints``.

    With ``arrow`` (pyiceberg's view of the same catalog, where it can take the table), the rows
    are scanned and appended by pyiceberg: a few rows per batch, for which a Spark job and its
    commit planning would be the bulk of a small batch's fixed cost.
    """

    def __init__(
        self,
        spark: SparkSession,
        catalog: str,
        namespace: str,
        pipeline: str,
        writer: TableWriter,
    ) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.namespace = namespace
        self.table = qualified(catalog, namespace, CHECKPOINTS)
        self.writer = writer

    def load(self) -> CheckpointState:
        """The committed state, and the plan of a batch that was started but not committed."""
        rows = self.writer.pipeline_rows(self.table, self.pipeline, CHECKPOINT_FIELDS)
        return checkpoint_state(rows)

    def plan(
        self, listing: list[LandedFile], state: CheckpointState, max_files: int | None = None
    ) -> BatchPlan:
        """The next batch: a pending plan if one exists, else every new file not seen before.

        A new file whose content fingerprint matches an applied file (or an earlier file of the
        same batch) is a duplicate landing under another name and is skipped.

        Args:
            listing: the landed files, in landing (path) order.
            state: what is committed.
            max_files: plan at most this many new files, the first in landing order; the rest
                wait for later batches. A pending plan is resumed whole regardless.
        """
        grown = {
            landed.uri: (
                f"applied with {state.applied[landed.uri][2]} bytes by batch "
                f"{state.applied[landed.uri][0]}, {landed.size} bytes now"
            )
            for landed in listing
            if landed.uri in state.applied
            and state.applied[landed.uri][2] not in (None, landed.size)
        }
        plan = self._next(listing, state, max_files)
        plan.changed_after_applied = grown
        return plan

    def _next(
        self, listing: list[LandedFile], state: CheckpointState, max_files: int | None
    ) -> BatchPlan:
        if state.pending is not None and state.pending_batch_id is not None:
            return BatchPlan(
                state.pending_batch_id,
                state.pending,
                resumed=True,
                replay=state.pending_replay,
                origins=state.pending_origins,
            )
        fingerprints = dict(state.fingerprints)
        files: list[LandedFile] = []
        duplicates: dict[str, str] = {}
        unreadable: dict[str, str] = {}
        new = [landed for landed in listing if landed.uri not in state.seen_files]
        for position, (landed, error) in enumerate(fingerprinted(new)):
            if max_files is not None and len(files) >= max_files:
                return BatchPlan(
                    state.last_batch_id + 1,
                    files,
                    duplicates,
                    deferred=len(new) - position,
                    unreadable=unreadable,
                )
            if error is not None:
                unreadable[landed.uri] = f"cannot be read: {error.strerror or error}"
                continue
            assert landed.fingerprint is not None
            original = fingerprints.get(landed.fingerprint)
            if original is not None:
                duplicates[landed.uri] = original
                continue
            fingerprints[landed.fingerprint] = landed.uri
            files.append(landed)
        return BatchPlan(state.last_batch_id + 1, files, duplicates, unreadable=unreadable)

    def record_planned(self, plan: BatchPlan) -> None:
        """Commit the batch's file list before any table is changed.

        A replay's rows carry, in ``summary``, the replay header and each file's original
        position, so that a run resuming the batch replays it the same way.
        """
        notes: list[str | None] = [None] * len(plan.files)
        if plan.replay is not None:
            notes = [
                json.dumps({"replay": plan.replay, "of_batch": b, "of_file_idx": i})
                for b, i in plan.origins
            ]
        rows = [
            self._row(
                plan.batch_id,
                PLANNED,
                file=f.uri,
                file_idx=i,
                size=f.size,
                fingerprint=f.fingerprint,
                summary=notes[i],
            )
            for i, f in enumerate(plan.files)
        ]
        self._append(rows, plan.batch_id)

    def record_committed(
        self,
        plan: BatchPlan,
        offsets: list[tuple[int, str, int, int, int, int]],
        records_per_file: dict[int, int],
        summary_json: str,
        left_out: dict[int, FileCheck] | None = None,
    ) -> None:
        """Seal the batch: applied files (with Kafka offset ranges), duplicates, and the summary.

        A file the batch left out gets a row of its own status (``missing``, ``changed``) with
        the reason in ``summary``: it is not seen, so a later batch plans it again if it lands.

        Args:
            plan: the batch.
            offsets: (file_idx, topic, partition, min_offset, max_offset, records) per file and
                topic partition, for ``envelope: kafka``.
            records_per_file: records read per file index.
            summary_json: the run summary.
            left_out: planned files not read, by index.
        """
        rows: list[dict[str, Any]] = []
        applied = APPLIED if plan.replay is None else REPLAYED
        with_offsets = {o[0] for o in offsets}
        left_out = left_out or {}
        for i, f in enumerate(plan.files):
            base = {"file": f.uri, "file_idx": i, "size": f.size, "fingerprint": f.fingerprint}
            if i in left_out:
                check = left_out[i]
                rows.append(self._row(plan.batch_id, check.status, summary=check.reason, **base))
            elif i not in with_offsets:
                rows.append(
                    self._row(plan.batch_id, applied, records=records_per_file.get(i, 0), **base)
                )
        for file_idx, topic, partition, lo, hi, count in offsets:
            f = plan.files[file_idx]
            rows.append(
                self._row(
                    plan.batch_id,
                    applied,
                    file=f.uri,
                    file_idx=file_idx,
                    size=f.size,
                    fingerprint=f.fingerprint,
                    kafka_topic=topic,
                    kafka_partition=partition,
                    min_offset=lo,
                    max_offset=hi,
                    records=count,
                )
            )
        for dup, original in plan.duplicates.items():
            rows.append(self._row(plan.batch_id, DUPLICATE, file=dup, duplicate_of=original))
        rows.append(self._row(plan.batch_id, COMMITTED, summary=summary_json))
        self._append(rows, plan.batch_id)

    def _row(self, batch_id: int, status: str, **values: Any) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "batch_id": batch_id,
            "status": status,
            "recorded_at": datetime.now(UTC).replace(tzinfo=None),
            **values,
        }

    def _append(self, rows: list[dict[str, Any]], batch_id: int) -> None:
        properties = {"cdc.pipeline": self.pipeline, "cdc.batch-id": str(batch_id)}
        self.writer.append_rows(self.table, rows, SYSTEM_TABLES[CHECKPOINTS], properties)
