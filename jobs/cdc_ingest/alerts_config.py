"""A pipeline's ``alerts`` key: when a batch fails its DAG run, and who hears of it.

```yaml
alerts:
  max_lag: 15m              # the mirror is older than this after the batch (now - freshness)
  dead_letters: true        # any dead letter in the batch
  rejected_ddl: true        # any DDL statement not applied
  notifier: airflow.providers.smtp.notifications.smtp.SmtpNotifier   # optional
  notifier_args: {to: oncall@example.com, subject: "cdc-ingest alert"}
```

A breached threshold fails the ingest DAG run's last task (``batch_summary``) with one line naming
every breach, so Airflow's own failure notifications and callbacks fire; ``notifier`` names an
Airflow notifier class (``BaseNotifier``) that the task calls on that failure. No pyspark here:
Airflow parses it with the DAGs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from cdc_ingest.maintenance_config import DURATION, UNITS

ALERT_KEYS = ("max_lag", "dead_letters", "rejected_ddl", "notifier", "notifier_args")
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+$")


class AlertsConfigError(ValueError):
    """The ``alerts`` mapping is invalid; the message names the key."""


@dataclass(frozen=True)
class AlertsConfig:
    """Parsed ``alerts`` of one pipeline (none set: a batch never fails for them)."""

    max_lag: timedelta | None = None
    dead_letters: bool = False
    rejected_ddl: bool = False
    notifier: str | None = None
    notifier_args: dict[str, Any] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        """Whether any threshold is set."""
        return self.max_lag is not None or self.dead_letters or self.rejected_ddl


def parse_alerts(raw: Any) -> AlertsConfig:
    """The ``alerts`` mapping, validated."""
    if raw is None:
        return AlertsConfig()
    if not isinstance(raw, dict):
        raise AlertsConfigError(f"alerts: expected a mapping of {', '.join(ALERT_KEYS)}")
    unknown = sorted(set(raw) - set(ALERT_KEYS))
    if unknown:
        raise AlertsConfigError(
            f"alerts: unknown key {unknown[0]!r} (known: {', '.join(ALERT_KEYS)})"
        )
    max_lag = None
    if raw.get("max_lag") is not None:
        match = DURATION.match(str(raw["max_lag"]).strip())
        if match is None:
            raise AlertsConfigError(
                f"alerts.max_lag: {raw['max_lag']!r} is not a duration like 30s, 15m, 12h or 7d"
            )
        max_lag = timedelta(**{UNITS[match.group(2)]: int(match.group(1))})
    flags = {}
    for key in ("dead_letters", "rejected_ddl"):
        value = raw.get(key, False)
        if not isinstance(value, bool):
            raise AlertsConfigError(f"alerts.{key}: expected true or false, got {value!r}")
        flags[key] = value
    notifier = raw.get("notifier")
    if notifier is not None and not (isinstance(notifier, str) and _IMPORT_PATH.match(notifier)):
        raise AlertsConfigError(
            f"alerts.notifier: {notifier!r} is not the import path of a notifier class"
        )
    args = raw.get("notifier_args") or {}
    if not isinstance(args, dict):
        raise AlertsConfigError("alerts.notifier_args: expected a mapping of keyword arguments")
    return AlertsConfig(max_lag, flags["dead_letters"], flags["rejected_ddl"], notifier, args)


def breaches(summary: dict[str, Any], alerts: AlertsConfig, now_s: float) -> list[str]:
    """What a recorded batch breached, one phrase each (empty: nothing to alert on)."""
    if summary.get("batch_id") is None:
        return []
    found = []
    freshness_ms = summary.get("freshness_ms")
    if alerts.max_lag is not None and isinstance(freshness_ms, int | float):
        lag = now_s - freshness_ms / 1000
        if lag > alerts.max_lag.total_seconds():
            found.append(
                f"lag {int(lag)} s exceeds max_lag {int(alerts.max_lag.total_seconds())} s"
            )
    dead = int(summary.get("dead_lettered") or 0)
    if alerts.dead_letters and dead:
        found.append(f"{dead} dead letters (see _cdc_dead_letters)")
    rejected = int(summary.get("ddl_rejected") or 0)
    if alerts.rejected_ddl and rejected:
        found.append(f"{rejected} DDL statements rejected (see _cdc_ddl_history)")
    return found
