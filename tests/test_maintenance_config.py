"""The ``maintenance`` key of a pipeline: defaults, durations and counts, one clear error."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml


def _load(tmp_path: Path, maintenance: object):
    from cdc_ingest.config import load_config

    path = tmp_path / "p.yaml"
    pipeline: dict[str, object] = {
        "name": "p",
        "format": "lindorm",
        "landing": "file:///l",
        "namespace": "ods",
    }
    if maintenance is not None:
        pipeline["maintenance"] = maintenance
    doc = {"catalog": {"uri": "sqlite:///c.db", "warehouse": "file:///w"}, "pipelines": [pipeline]}
    path.write_text(yaml.safe_dump(doc))
    return load_config(path).pipeline("p").maintenance


def test_defaults_durations_and_counts(tmp_path: Path) -> None:
    default = _load(tmp_path, None)
    assert (default.schedule, default.retain_snapshots) == ("@daily", timedelta(days=7))
    assert (default.orphan_older_than, default.lock_wait) == (timedelta(days=3), timedelta(hours=1))
    custom = _load(
        tmp_path,
        {"schedule": "none", "retain_snapshots": 5, "orphan_older_than": "36h", "lock_wait": "90s"},
    )
    assert (custom.schedule, custom.retain_snapshots) == (None, 5)
    assert (custom.orphan_older_than, custom.lock_wait) == (
        timedelta(hours=36),
        timedelta(seconds=90),
    )
    assert _load(tmp_path, {"retain_snapshots": "12h"}).retain_snapshots == timedelta(hours=12)


def test_tombstones_are_kept_for_good_unless_a_retention_is_given(tmp_path: Path) -> None:
    assert _load(tmp_path, None).tombstone_retention is None
    assert _load(tmp_path, {"tombstone_retention": "none"}).tombstone_retention is None
    retained = _load(tmp_path, {"tombstone_retention": "30d"}).tombstone_retention
    assert retained == timedelta(days=30)


@pytest.mark.parametrize(
    ("maintenance", "reason"),
    [
        ({"retain": 3}, "maintenance: unknown key 'retain' (keys: schedule, retain_snapshots, "),
        ({"retain_snapshots": 0}, "maintenance.retain_snapshots: 0 must be a duration or a count"),
        (
            {"retain_snapshots": "1 week"},
            "maintenance.retain_snapshots: '1 week' is not a duration",
        ),
        ({"orphan_older_than": "10m"}, "maintenance.orphan_older_than: must be at least 1h"),
        (
            {"tombstone_retention": "1 month"},
            "maintenance.tombstone_retention: '1 month' is not a duration",
        ),
        ("daily", "maintenance: expected a mapping"),
    ],
)
def test_invalid_maintenance_names_file_pipeline_and_key(
    tmp_path: Path, maintenance: object, reason: str
) -> None:
    from cdc_ingest.config import ConfigError

    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, maintenance)
    assert str(raised.value).startswith(f"{tmp_path / 'p.yaml'}: pipeline 'p': {reason}")
