"""The status page's records: per pipeline, what is applied, pending, fresh and rejected.

Filled by :mod:`cdc_ingest_airflow.pipeline_status`, rendered by
:mod:`cdc_ingest_airflow.status_html`, served as JSON by :mod:`cdc_ingest_airflow.status_page`.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any


@dataclass
class TableStatus:
    """One mirrored table of a pipeline and what the newest batch that touched it did."""

    name: str
    exists: bool
    rows: int | None = None  # live rows per the current snapshot; None when not derivable
    batch_id: int | None = None  # the newest batch that touched the table
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    dead_lettered: int = 0
    # Its SCD type 2 history table (``history: scd2``) and the versions it holds, if any.
    history: str | None = None
    history_rows: int | None = None
    # Its files in the current snapshot: position-delete files are the micro-batches' debt to its
    # readers, which each read merges with the data files until ``maintain`` compacts them.
    data_files: int | None = None
    delete_files: int | None = None
    # Why its ``maintenance.triggers`` make maintenance due (cdc_ingest.read_debt), if they do.
    maintenance_due: str | None = None
    # Its expectations' violations in that batch: rule -> (on_violation, changes).
    expectations: dict[str, tuple[str, int]] = field(default_factory=dict)


@dataclass
class CheckpointStatus:
    """What ``_cdc_checkpoints`` says is applied."""

    last_batch_id: int | None = None
    committed_at: datetime | None = None
    files_applied: int = 0
    duplicates: int = 0
    awaiting_resume: int | None = None  # a planned batch not committed yet


@dataclass
class BatchStatus:
    """The newest row of ``_cdc_batches``."""

    batch_id: int
    partial: bool
    run_id: str | None
    finished_at: datetime | None
    duration_s: float | None
    files: int
    lines: int
    messages: int
    dead_lettered: int
    ddl_recorded: int
    inserted: int
    updated: int
    deleted: int


@dataclass
class DeadLetter:
    """One line that could not be applied (``raw`` truncated to ``RAW_CHARS``)."""

    batch_id: int
    file: str
    line: int | None
    target_table: str | None
    reason: str
    raw: str | None
    recorded_at: datetime | None


@dataclass
class DdlRecord:
    """One row of ``_cdc_ddl_history``."""

    batch_id: int
    target_table: str | None
    statement: str
    status: str
    detail: str | None
    event_time: datetime | None


@dataclass
class BatchPoint:
    """One batch of a pipeline's recent history (the status page's charts)."""

    batch_id: int
    duration_s: float | None
    rows_applied: int  # inserted + updated + deleted
    dead_lettered: int
    lag_s: float | None  # from the newest source event it applied to when it finished


@dataclass
class PipelineStatus:
    """Everything the page shows for one pipeline."""

    name: str
    format: str
    landing: str
    namespace: str
    dag_id: str
    problems: list[str] = field(default_factory=list)
    namespace_exists: bool = False
    tables: list[TableStatus] = field(default_factory=list)
    checkpoint: CheckpointStatus | None = None
    pending_count: int | None = None  # None: the landing zone could not be listed
    pending_files: list[str] = field(default_factory=list)  # the first PENDING_LISTED
    freshness: datetime | None = None  # newest source event time applied
    freshness_lag_s: float | None = None
    last_batch: BatchStatus | None = None
    dead_letters_total: int = 0
    dead_letters: list[DeadLetter] = field(default_factory=list)
    ddl_history: list[DdlRecord] = field(default_factory=list)
    history: list[BatchPoint] = field(default_factory=list)  # oldest first, the last HISTORY
    health: str = "ok"  # the worst of HEALTH_ORDER that holds (status_health)
    health_reasons: list[str] = field(default_factory=list)


@dataclass
class Overview:
    """The page: the pipelines file, its catalog and every pipeline's status."""

    config_path: str | None
    generated_at: datetime
    catalog: str | None = None
    error: str | None = None
    pipelines: list[PipelineStatus] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601 UTC strings)."""
        encoded: dict[str, Any] = json.loads(json.dumps(asdict(self), default=_iso))
        return encoded


def dag_id(pipeline: str) -> str:
    """The pipeline's DAG id (``dag_factory.DAG_ID_PREFIX``; dag_factory imports the provider)."""
    return f"ingest_{pipeline}"


def redact(uri: str) -> str:
    """A catalog URI without its password."""
    return re.sub(r"(://[^:@/]+):[^@/]*@", r"\1:***@", uri)


def _iso(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC).isoformat()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
