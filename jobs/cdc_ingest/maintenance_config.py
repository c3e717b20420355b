"""A pipeline's ``maintenance`` key: when and how its tables are compacted and cleaned up.

```yaml
maintenance:
  schedule: "@daily"        # the maintain_<pipeline> DAG's schedule; none: only when triggered
  retain_snapshots: 7d      # a duration (keep snapshots this young, and the last one) or a count
  orphan_older_than: 3d     # files no snapshot references, older than this, are deleted
  lock_wait: 1h             # how long ingest and maintenance wait for each other
  tombstone_retention: none # deleted keys' tombstones older than this are dropped; none: kept
  triggers:                 # also maintain as soon as a batch leaves a table past one of these
    commits: 10             #   commits that added small data files or delete files since the
                            #   table's last compaction
    delete_files_per_data_file: 0.5   # live delete files per live data file (from 4 on)
```

``triggers: none`` maintains on the schedule only (:mod:`cdc_ingest.read_debt` measures a table).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator
from pydantic.dataclasses import dataclass

from cdc_ingest.config_model import (
    DURATION_SCHEMA,
    NONE,
    SECTION,
    Duration,
    OptionalDuration,
    Schedule,
    format_duration,
    parse_duration,
)

__all__ = ["MaintenanceConfig", "MaintenanceTriggers", "format_duration"]

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


def _none(value: Any) -> Any:
    return None if value in NONE else value


@dataclass(frozen=True, config=SECTION)
class MaintenanceTriggers:
    """``maintenance.triggers``: the read debt at which a table's maintenance is due (a key set
    to none never triggers)."""

    # Each such commit leaves a reader one more small file to open (or a delete file to apply).
    commits: Annotated[Annotated[int, Field(ge=1)] | None, BeforeValidator(_none)] = 10
    delete_files_per_data_file: Annotated[
        Annotated[float, Field(gt=0)] | None, BeforeValidator(_none)
    ] = 0.5


@dataclass(frozen=True, config=SECTION)
class MaintenanceConfig:
    """A pipeline's ``maintenance`` settings."""

    schedule: Schedule = "@daily"
    retain_snapshots: Retention = timedelta(days=7)
    orphan_older_than: Duration = timedelta(days=3)
    lock_wait: Duration = timedelta(hours=1)
    # How long a deleted key's tombstone stops older changes of it (None: for good).
    tombstone_retention: OptionalDuration = None
    # When a batch leaves a table's reads needing maintenance (None: on the schedule only).
    triggers: Annotated[MaintenanceTriggers | None, BeforeValidator(_none)] = MaintenanceTriggers()

    @field_validator("orphan_older_than")
    @classmethod
    def _young_files_kept(cls, value: timedelta) -> timedelta:
        if value < MIN_ORPHAN_AGE:
            raise ValueError(
                "must be at least 1h (files of commits in flight are not referenced yet)"
            )
        return value
