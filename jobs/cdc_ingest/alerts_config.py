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
from dataclasses import field
from typing import Annotated, Any

from pydantic import BeforeValidator, Strict
from pydantic.dataclasses import dataclass

from cdc_ingest.config_model import SECTION, OptionalDuration

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+$")


def _notifier(value: Any) -> str | None:
    if value is not None and not (isinstance(value, str) and _IMPORT_PATH.match(value)):
        raise ValueError(f"{value!r} is not the import path of a notifier class")
    return value


@dataclass(frozen=True, config=SECTION)
class AlertsConfig:
    """A pipeline's ``alerts`` (none set: a batch never fails for them)."""

    max_lag: OptionalDuration = None
    dead_letters: Annotated[bool, Strict()] = False
    rejected_ddl: Annotated[bool, Strict()] = False
    notifier: Annotated[str | None, BeforeValidator(_notifier)] = None
    notifier_args: dict[str, Any] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        """Whether any threshold is set."""
        return self.max_lag is not None or self.dead_letters or self.rejected_ddl


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
