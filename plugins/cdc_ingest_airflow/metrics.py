"""Batch and table metrics through Airflow's own metrics client (StatsD, Datadog or OpenTelemetry,
whichever ``[metrics]`` configures), sent by ``apply_batch`` once its batch is recorded.

Names (StatsD has no tags unless ``statsd_influxdb_enabled`` or Datadog is on, so the pipeline and
table are part of the name; the same values also go out with ``pipeline`` and ``table`` tags):

- ``cdc_ingest.<pipeline>.batch_duration`` (timer, ms): the batch's wall time;
- ``cdc_ingest.<pipeline>.lag_seconds`` (gauge): now minus the batch's freshness (the newest
  source event time applied);
- ``cdc_ingest.<pipeline>.files_pending`` (gauge): landed files still to apply after the batch;
- ``cdc_ingest.<pipeline>.lines``, ``.dead_lettered``, ``.ddl_rejected`` (counters);
- ``cdc_ingest.<pipeline>.<table>.inserted``, ``.updated``, ``.deleted``, ``.dead_lettered``
  (counters), for each table the batch counted;
- ``cdc_ingest.<pipeline>.<table>.expectation.<rule>`` (counter): the changes that violated
  each of the table's expectations (tagged ``rule`` and ``on_violation`` as well).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

PREFIX = "cdc_ingest"


def batch_metrics(
    summary: Mapping[str, Any], files_pending: int, now: float | None = None
) -> list[tuple[str, str, float, dict[str, str]]]:
    """``(kind, name, value, tags)`` of one recorded batch; kind is gauge, incr or timing."""
    if summary.get("batch_id") is None:
        return []
    pipeline = str(summary["pipeline"])
    tags = {"pipeline": pipeline}
    base = f"{PREFIX}.{pipeline}"
    found: list[tuple[str, str, float, dict[str, str]]] = []
    duration = sum(float(s) for s in (summary.get("phase_seconds") or {}).values())
    found.append(("timing", f"{base}.batch_duration", duration * 1000, tags))
    freshness_ms = summary.get("freshness_ms")
    if isinstance(freshness_ms, int | float):
        now = time.time() if now is None else now
        found.append(("gauge", f"{base}.lag_seconds", max(0.0, now - freshness_ms / 1000), tags))
    found.append(("gauge", f"{base}.files_pending", float(files_pending), tags))
    for field in ("lines", "dead_lettered", "ddl_rejected"):
        found.append(("incr", f"{base}.{field}", float(summary.get(field) or 0), tags))
    for table, counts in sorted((summary.get("tables") or {}).items()):
        table_tags = {**tags, "table": table}
        for field in ("inserted", "updated", "deleted", "dead_lettered"):
            value = float(counts.get(field) or 0)
            found.append(("incr", f"{base}.{table}.{field}", value, table_tags))
        for rule, counted in sorted((counts.get("expectations") or {}).items()):
            rule_tags = {**table_tags, "rule": rule, "on_violation": counted["on_violation"]}
            value = float(counted["violations"])
            found.append(("incr", f"{base}.{table}.expectation.{rule}", value, rule_tags))
    return found


def send_batch_metrics(summary: Mapping[str, Any], files_pending: int) -> int:
    """Send :func:`batch_metrics` through Airflow's metrics client; returns how many."""
    from airflow.sdk.observability import stats

    sent = batch_metrics(summary, files_pending)
    for kind, name, value, tags in sent:
        if kind == "timing":
            stats.timing(name, value, tags=tags)
        elif kind == "gauge":
            stats.gauge(name, value, tags=tags)
        else:
            stats.incr(name, int(value), tags=tags)
    return len(sent)
