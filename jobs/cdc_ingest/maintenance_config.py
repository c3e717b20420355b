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

from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema, field_validator
from pydantic.dataclasses import dataclass

from cdc_ingest.config_model import (
    DURATION_SCHEMA,
    SECTION,
    Duration,
    OptionalDuration,
    Schedule,
    format_duration,
    parse_duration,
)

__all__ = ["MaintenanceConfig", "format_duration"]

# Writers still committing may have written files no snapshot references yet: never delete young
# files, whatever the config says.
MIN_ORPHAN_AGE = timedelta(hours=1)


def _retention(value: Any) -> timedelta | int:
    if isinstance(value, bool) or (isinstance(value, int) and value < 1):
        raise ValueError(f"{value!r} must be a duration or a count >= 1")
    return value if isinstance(value, int) else parse_duration(value)


# Either a duration (snapshots younger than it are kept) or a number of snapshots to keep.
Retention = Annotated[
    timedelta | int,
    BeforeValidator(_retention),
    WithJsonSchema({"anyOf": [DURATION_SCHEMA, {"type": "integer"}]}),
]


@dataclass(frozen=True, config=SECTION)
class MaintenanceConfig:
    """A pipeline's ``maintenance`` settings."""

    schedule: Schedule = "@daily"
    retain_snapshots: Retention = timedelta(days=7)
    orphan_older_than: Duration = timedelta(days=3)
    lock_wait: Duration = timedelta(hours=1)
    # How long a deleted key's tombstone stops older changes of it (None: for good).
    tombstone_retention: OptionalDuration = None

    @field_validator("orphan_older_than")
    @classmethod
    def _young_files_kept(cls, value: timedelta) -> timedelta:
        if value < MIN_ORPHAN_AGE:
            raise ValueError(
                "must be at least 1h (files of commits in flight are not referenced yet)"
            )
        return value
