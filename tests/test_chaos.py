"""A batch killed at random commit points, ten times in a row, ends as a clean run does."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from canal_messages import ddl_message, typed_message
from conftest import Lake

CLI = str(Path(sys.executable).parent / "cdc-ingest")
TYPES = {"id": "INT", "v": "VARCHAR(10)", "n": "INT"}


def _row(table: str, kind: str, data: dict, es: int, old: dict | None = None) -> dict:
    return typed_message(table, kind, data, es, TYPES, old)


def _ddl(table: str, sql: str, kind: str, es: int) -> dict:
    return ddl_message(table, sql, kind, es)


# Three files, four tables (one created by DDL), a column added mid-stream, a key moved, a
# delete of a key never seen, and a line that is not JSON.
FILES: dict[str, list[Any]] = {
    "001.json": [
        _row("orders", "INSERT", {"id": 1, "v": "a"}, 1),
        _row("orders", "INSERT", {"id": 2, "v": "b"}, 2),
        _row("items", "INSERT", {"id": 1, "v": "x"}, 3),
        _row("users", "INSERT", {"id": 1, "v": "u"}, 4),
    ],
    "002.json": [
        _ddl("orders", "ALTER TABLE orders ADD COLUMN n INT", "ALTER", 5),
        _row("orders", "UPDATE", {"id": 1, "v": "a", "n": 10}, 6),
        _row("orders", "UPDATE", {"id": 3, "v": "b", "n": 20}, 7, old={"id": "2"}),
        _ddl("tags", "CREATE TABLE tags (id INT PRIMARY KEY, v VARCHAR(10))", "CREATE", 8),
        _row("tags", "INSERT", {"id": 7, "v": "t"}, 9),
        "not json",
    ],
    "003.json": [
        _row("items", "DELETE", {"id": 1, "v": "x"}, 10),
        _row("items", "DELETE", {"id": 9, "v": "never"}, 11),
        _row("users", "UPDATE", {"id": 1, "v": "u2"}, 12),
        _row("items", "INSERT", {"id": 2, "v": "y"}, 13),
    ],
}
TABLES = ("orders", "items", "users", "tags")


def _run(lake: Lake, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, "run", "--config", str(lake.config_path), "--pipeline", "shop", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )


def _state(lake: Lake) -> dict[str, Any]:
    """Everything a run leaves that a user reads: rows, dead letters, DDL history, counts."""
    batches = lake.table("_cdc_batches").collect()
    [batch] = batches
    return {
        **{t: lake.rows(t) for t in TABLES},
        "dead_letters": [(os.path.basename(d["file"]), d["line"]) for d in lake.dead_letters()],
        "ddl": sorted(
            (r["target_table"], r["status"]) for r in lake.table("_cdc_ddl_history").collect()
        ),
        "batch": {
            k: batch[k]
            for k in ("lines", "messages", "dead_lettered", "inserted", "updated", "deleted")
        },
        "table_counts": json.loads(batch["table_counts"]),
        "applied": sorted(
            os.path.basename(r["file"])
            for r in lake.table("_cdc_checkpoints").where("status = 'applied'").collect()
        ),
    }


def _lake(root: Path, spark: Any, catalog: str) -> Lake:
    lake = Lake(root=root, spark=spark, catalog=catalog)
    lake.add_pipeline("shop", "canal-json")
    for name, lines in FILES.items():
        lake.land("shop", name, lines)
    return lake


@pytest.mark.slow
def test_a_batch_killed_at_random_commit_points_ten_times_ends_as_a_clean_run(
    spark, tmp_path, engine_dir
):
    clean = _lake(tmp_path / "clean", spark, "chaos_clean")
    # The clean reference run on the worker's warm engine; the killed runs are cold processes.
    done = _run(clean, CDC_INGEST_ENGINE_DIR=str(engine_dir))
    assert done.returncode == 0, done.stderr[-2000:]
    chaos = _lake(tmp_path / "chaos", spark, "chaos_killed")
    chance = random.Random(20261123)
    kills: list[str] = []
    for _ in range(10):
        killed = _run(chaos, CDC_INGEST_FAIL_AFTER_COMMITS=str(chance.randint(1, 2)))
        if killed.returncode == 0:
            break
        assert killed.returncode == 99, killed.stderr[-2000:]
        kills.append(killed.stderr.strip().splitlines()[-1])
    finished = _run(chaos)
    assert finished.returncode == 0, finished.stderr[-2000:]

    assert len(kills) == 10, kills
    # The kills fell on commits of several kinds along the batch (plan, DDL, tables, bookkeeping).
    kinds = {kill.split("(", 1)[1].split()[0] for kill in kills}
    assert len(kinds) >= 3, kills
    expected = _state(clean)
    assert expected["orders"] == [
        {"id": 1, "v": "a", "n": 10},
        {"id": 3, "v": "b", "n": 20},
    ]
    assert expected["batch"] == {
        "lines": 14,
        "messages": 13,
        "dead_lettered": 1,
        "inserted": 6,
        "updated": 1,
        "deleted": 1,
    }
    state = _state(chaos)
    differing = {k: (state[k], v) for k, v in expected.items() if state[k] != v}
    assert not differing, json.dumps(differing, sort_keys=True, default=str)
