"""``_cdc_batches`` describes the whole batch, also when a killed batch was resumed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from canal_messages import canal_message

CLI = str(Path(sys.executable).parent / "cdc-ingest")


def _run(lake: Any, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, "run", "--config", str(lake.config_path), "--pipeline", "shop", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )


@pytest.mark.slow
def test_a_resumed_batch_row_counts_what_the_killed_attempt_applied(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1),
            canal_message("items", "INSERT", {"id": 1, "v": "x"}, 2),
        ],
    )
    assert _run(lake).returncode == 0
    lake.land(
        "shop",
        "002.json",
        [
            canal_message("orders", "INSERT", {"id": 2, "v": "b"}, 3),
            canal_message("orders", "UPDATE", {"id": 1, "v": "a2"}, 4),
            canal_message("orders", "DELETE", {"id": 9, "v": "gone"}, 5),
            canal_message("items", "INSERT", {"id": 2, "v": "y"}, 6),
            canal_message("items", "DELETE", {"id": 1, "v": "x"}, 7),
            canal_message("users", "INSERT", {"id": 1, "v": "new"}, 8),
            # New tables that only receive deletes: applied with users (apply/fresh_tables.py),
            # their counts noted on the one _cdc_tombstones commit they share.
            canal_message("gone", "DELETE", {"id": 9, "v": "x"}, 9),
            canal_message("lost", "DELETE", {"id": 7, "v": "y"}, 10),
            canal_message("lost", "DELETE", {"id": 8, "v": "z"}, 11),
        ],
    )
    # Every table is committed, the batch is not.
    killed = _run(lake, CDC_INGEST_FAIL_AT="after_tables")
    assert killed.returncode == 99, killed.stderr[-2000:]

    resumed = _run(lake)

    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert summary["resumed"]
    [row] = lake.table("_cdc_batches").where("batch_id = 2").collect()
    assert (row["inserted"], row["updated"], row["deleted"]) == (3, 1, 1)
    counts = json.loads(row["table_counts"])
    assert {
        t: (c["inserted"], c["updated"], c["deleted"], c["deleted_absent"], c["older"])
        for t, c in counts.items()
    } == {
        "orders": (1, 1, 0, 1, 0),
        "items": (1, 0, 1, 0, 0),
        "users": (1, 0, 0, 0, 0),
        "gone": (0, 0, 0, 1, 0),
        "lost": (0, 0, 0, 2, 0),
    }
    assert counts["users"]["created"] and not counts["orders"]["created"]
