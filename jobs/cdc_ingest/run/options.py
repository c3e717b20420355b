"""How one run differs from "apply every new file to every table"."""

from __future__ import annotations

from dataclasses import dataclass

from cdc_ingest.landing.landed_time import LandedRange


class RunRefused(RuntimeError):
    """The run's options cannot be honoured in the pipeline's current state."""


@dataclass(frozen=True)
class RunOptions:
    """How one run differs from "apply every new file to every table".

    Attributes:
        tables: apply only these target tables. The checkpoint is file-level, so the batch's
            files are not marked applied: a later full run applies them to every table, and
            re-applying them to these tables changes nothing (the ordering guards skip changes
            not newer than what a table holds). Dead letters and DDL history are left to that
            full run, so they are written once. Append-only (keyless) tables are not applied by
            such a run: appends cannot be repeated safely. Refused while a batch is pending.
        dry_run: read, decode and count; write nothing (no table, dead letter, batch row or
            checkpoint; not even the system tables of a new namespace).
        max_files: plan at most this many new files, the first in landing order.
        run_id: the orchestrator's run id, stored in ``_cdc_batches``.
        landed: replay the committed files whose landing time is in this range (see ``replay``).
        rebuild_tables: drop these tables and apply every committed file still landed to them.
    """

    tables: tuple[str, ...] = ()
    dry_run: bool = False
    max_files: int | None = None
    run_id: str | None = None
    landed: LandedRange | None = None
    rebuild_tables: tuple[str, ...] = ()
