"""A pipeline's ``maintenance`` key: when and how its tables are compacted and cleaned up.

```yaml
maintenance:
  schedule: "@daily"        # the maintain_<pipeline> DAG's schedule; none: only when triggered
  retain_snapshots: 7d      # a duration (keep snapshots this young, and the last one) or a count
  orphan_older_than: 3d     # files no snapshot references, older than this, are deleted
  lock_wait: 1h             # how long ingest and maintenance wait for each other
  tombstone_retention: none # deleted keys' tombstones older than this are dropped; none: kept
```
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

DURATION = re.compile(r"^(\d+)\s*([smhd])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
MAINTENANCE_KEYS = (
    "schedule",
    "retain_snapshots",
    "orphan_older_than",
    "lock_wait",
    "tombstone_retention",
)
NONE = (None, "", "none", "None")
# Writers still committing may have written files no snapshot references yet: never delete young
# files, whatever the config says.
MIN_ORPHAN_AGE = timedelta(hours=1)


class MaintenanceConfigError(ValueError):
    """The ``maintenance`` mapping is invalid; the message names the key."""


@dataclass(frozen=True)
class MaintenanceConfig:
    """Parsed ``maintenance`` settings of one pipeline."""

    schedule: str | None = "@daily"
    # Either a duration (snapshots younger than it are kept) or a number of snapshots to keep.
    retain_snapshots: timedelta | int = timedelta(days=7)
    orphan_older_than: timedelta = timedelta(days=3)
    lock_wait: timedelta = timedelta(hours=1)
    # How long a deleted key's tombstone stops older changes of it (None: for good).
    tombstone_retention: timedelta | None = None


def parse_duration(value: Any, key: str) -> timedelta:
    """``30s``, ``15m``, ``12h`` or ``7d`` as a timedelta.

    Raises:
        MaintenanceConfigError: naming ``key`` and the value.
    """
    match = DURATION.match(str(value).strip()) if isinstance(value, str) else None
    if match is None:
        raise MaintenanceConfigError(
            f"maintenance.{key}: {value!r} is not a duration like 30s, 15m, 12h or 7d"
        )
    return timedelta(**{UNITS[match.group(2)]: int(match.group(1))})


def format_duration(duration: timedelta) -> str:
    """A duration in the largest unit that divides it exactly: ``7d``, ``36h``, ``90s``."""
    seconds = int(duration.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def parse_maintenance(raw: Any) -> MaintenanceConfig:
    """The ``maintenance`` mapping of a pipeline (absent: the defaults).

    Raises:
        MaintenanceConfigError: unknown key or invalid value, naming the key.
    """
    if raw is None:
        return MaintenanceConfig()
    if not isinstance(raw, dict):
        raise MaintenanceConfigError(
            f"maintenance: expected a mapping ({', '.join(MAINTENANCE_KEYS)}), got {raw!r}"
        )
    unknown = sorted(str(k) for k in raw if k not in MAINTENANCE_KEYS)
    if unknown:
        raise MaintenanceConfigError(
            f"maintenance: unknown key {unknown[0]!r} (keys: {', '.join(MAINTENANCE_KEYS)})"
        )
    defaults = MaintenanceConfig()
    schedule = raw.get("schedule", defaults.schedule)
    retain: timedelta | int = defaults.retain_snapshots
    if "retain_snapshots" in raw:
        value = raw["retain_snapshots"]
        if isinstance(value, bool) or (isinstance(value, int) and value < 1):
            raise MaintenanceConfigError(
                f"maintenance.retain_snapshots: {value!r} must be a duration or a count >= 1"
            )
        retain = value if isinstance(value, int) else parse_duration(value, "retain_snapshots")
    orphan = defaults.orphan_older_than
    if "orphan_older_than" in raw:
        orphan = parse_duration(raw["orphan_older_than"], "orphan_older_than")
        if orphan < MIN_ORPHAN_AGE:
            raise MaintenanceConfigError(
                "maintenance.orphan_older_than: must be at least 1h (files of commits in flight "
                "are not referenced yet)"
            )
    lock_wait = defaults.lock_wait
    if "lock_wait" in raw:
        lock_wait = parse_duration(raw["lock_wait"], "lock_wait")
    tombstones = raw.get("tombstone_retention")
    return MaintenanceConfig(
        schedule=None if schedule in NONE else str(schedule),
        retain_snapshots=retain,
        orphan_older_than=orphan,
        lock_wait=lock_wait,
        tombstone_retention=(
            None if tombstones in NONE else parse_duration(tombstones, "tombstone_retention")
        ),
    )
