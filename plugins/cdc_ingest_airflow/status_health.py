"""A pipeline's health, from the state the status page reads: the overview's first column.

In order of severity (the overview lists the worst first):

- ``failing``: its landing zone or the catalog cannot be read;
- ``stuck``: a planned batch was never committed (a failed run; the next run resumes it);
- ``lagging``: the newest applied source event is older than the pipeline's ``alerts.max_lag``
  (without one: older than an hour while landed files wait; a quiet source is not behind);
- ``dead letters``: its last batches dead-lettered lines;
- ``ok``.

Every condition that holds is listed as a reason; the health is the worst of them.
"""

from __future__ import annotations

from cdc_ingest_airflow.status_model import PipelineStatus

HEALTH_ORDER = ("failing", "stuck", "lagging", "dead letters", "ok")
DEFAULT_MAX_LAG_S = 3600.0
RECENT_BATCHES = 5
FAILURES = ("catalog unreadable", "landing zone unreadable")


def duration(seconds: float) -> str:
    """``1d 02:03:04`` or ``02:03:04``."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return (f"{days}d " if days else "") + f"{hours:02d}:{minutes:02d}:{secs:02d}"


def assess(status: PipelineStatus, max_lag_s: float | None) -> None:
    """Set ``status.health`` and ``status.health_reasons``."""
    found: dict[str, list[str]] = {}
    failures = [p for p in status.problems if p.startswith(FAILURES)]
    if failures:
        found["failing"] = failures
    checkpoint = status.checkpoint
    if checkpoint is not None and checkpoint.awaiting_resume is not None:
        found["stuck"] = [
            f"planned batch {checkpoint.awaiting_resume} is not committed: the next run resumes it"
        ]
    lag, pending = status.freshness_lag_s, status.pending_count or 0
    limit = max_lag_s if max_lag_s is not None else DEFAULT_MAX_LAG_S
    if lag is not None and lag > limit and (max_lag_s is not None or pending):
        found["lagging"] = [
            f"lag {duration(lag)} over {duration(limit)}"
            + (f", {pending} files pending" if pending else "")
        ]
    recent = status.history[-RECENT_BATCHES:]
    letters = sum(b.dead_lettered for b in recent)
    if letters:
        batches = "batch" if len(recent) == 1 else f"{len(recent)} batches"
        lines = "dead letter" if letters == 1 else "dead letters"
        found["dead letters"] = [f"{letters} {lines} in the last {batches}"]
    status.health = next((h for h in HEALTH_ORDER if h in found), "ok")
    status.health_reasons = [r for h in HEALTH_ORDER for r in found.get(h, [])]
    if status.health == "ok" and status.last_batch is None:
        status.health_reasons = ["no batch yet"]


def worst_first(statuses: list[PipelineStatus]) -> list[PipelineStatus]:
    """Pipelines by health, the worst first; by name within one health."""
    return sorted(statuses, key=lambda s: (HEALTH_ORDER.index(s.health), s.name))
