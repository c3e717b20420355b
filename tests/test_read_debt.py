"""A table's read debt (``cdc_ingest.read_debt``) on real tables, and when it makes maintenance
due: counted from the batches' own commits, reset by ``maintain``.

The commits each batch makes are written here by hand (a create, a MERGE, a rewrite of a small
table); the live files are checked against Iceberg's own metadata tables read by Spark.
"""

from __future__ import annotations

from typing import Any

import pytest
from canal_messages import canal_message
from cdc_ingest.maintenance_config import MaintenanceTriggers
from cdc_ingest.read_debt import MAINTAINED_SNAPSHOT, ReadDebt
from conftest import Lake


def _debt(lake: Lake) -> tuple[ReadDebt, Any]:
    from cdc_ingest.config import load_config
    from cdc_ingest.state.lake import open_catalog

    table = open_catalog(load_config(lake.config_path).catalog).load_table("ods.orders")
    return ReadDebt.of(table), table


def _live_files(lake: Lake) -> tuple[int, int]:
    """Data files and delete files of the table's current snapshot, from Iceberg's ``files``."""
    lake.table("orders")
    rows = lake.spark.sql(f"SELECT content FROM {lake.catalog}.ods.orders.files").collect()
    return sum(r["content"] == 0 for r in rows), sum(r["content"] != 0 for r in rows)


def _maintain(lake: Lake) -> None:
    from cdc_ingest.config import load_config
    from cdc_ingest.maintenance import maintain_pipeline

    maintain_pipeline(lake.spark, load_config(lake.config_path), "shop")


def test_merged_batches_add_debt_until_maintain(lake: Lake) -> None:
    lake.add_pipeline("shop", "canal-json")
    lake.route_at(rewritten_rows=0)  # merged by Spark: new data files and position deletes
    batches = [
        [
            canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1),
            canal_message("orders", "INSERT", {"id": 2, "v": "b"}, 2),
        ],
        [canal_message("orders", "UPDATE", {"id": 1, "v": "a2"}, 3)],
        [canal_message("orders", "DELETE", {"id": 2, "v": "b"}, 4)],
    ]
    counted = []
    for number, lines in enumerate(batches, 1):
        lake.land("shop", f"{number:03}.json", lines)
        lake.run("shop")
        debt, _ = _debt(lake)
        counted.append(debt.commits)
        assert (debt.data_files, debt.delete_files) == _live_files(lake)
    # The create's small file, then each MERGE's delete file (and the update's new row).
    assert counted == [1, 2, 3]
    debt, _ = _debt(lake)
    assert debt.delete_files >= 1
    assert debt.due(MaintenanceTriggers(commits=3)) == (
        "3 commits of small or delete files since its last maintenance (trigger: 3)"
    )
    assert debt.due(MaintenanceTriggers(commits=4)) is None
    assert debt.due(None) is None

    _maintain(lake)
    debt, table = _debt(lake)
    assert debt == ReadDebt(data_files=1, delete_files=0, commits=0)
    assert table.properties[MAINTAINED_SNAPSHOT] == str(table.current_snapshot().snapshot_id)
    assert lake.rows("orders") == [{"id": 1, "v": "a2"}]

    lake.land("shop", "004.json", [canal_message("orders", "INSERT", {"id": 3, "v": "c"}, 5)])
    lake.run("shop")
    assert _debt(lake)[0].commits == 1


def test_a_small_table_rewritten_whole_owes_nothing_and_maintain_resets_its_count(
    lake: Lake,
) -> None:
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1)])
    lake.run("shop")
    assert _debt(lake)[0] == ReadDebt(data_files=1, delete_files=0, commits=1)
    # The default route rewrites a small table's one file: one added, one removed.
    lake.land("shop", "002.json", [canal_message("orders", "UPDATE", {"id": 1, "v": "a2"}, 2)])
    lake.run("shop")
    assert _debt(lake)[0] == ReadDebt(data_files=1, delete_files=0, commits=1)
    # One file: compaction rewrites nothing (no replace snapshot), the recorded snapshot resets.
    _maintain(lake)
    debt, table = _debt(lake)
    assert debt == ReadDebt(data_files=1, delete_files=0, commits=0)
    assert all(s.summary.operation.value != "replace" for s in table.snapshots())


@pytest.mark.parametrize(
    ("debt", "why"),
    [
        (ReadDebt(data_files=8, delete_files=4, commits=1), "4 delete files on 8 data files"),
        (ReadDebt(data_files=20, delete_files=9, commits=1), None),
        # A few delete files are no debt, whatever the ratio.
        (ReadDebt(data_files=1, delete_files=3, commits=1), None),
        (ReadDebt(data_files=0, delete_files=4, commits=1), "4 delete files on 0 data files"),
    ],
)
def test_delete_files_per_data_file(debt: ReadDebt, why: str | None) -> None:
    triggers = MaintenanceTriggers(commits=None, delete_files_per_data_file=0.5)
    found = debt.due(triggers)
    assert (found if found is None else found.split(" (")[0]) == why
    if why is not None:
        assert found == f"{why} (trigger: 0.5 per data file)"


@pytest.mark.usefixtures("warm_engine")  # the CLI's run goes to the worker's engine
def test_maintain_due_compacts_only_the_due_tables_and_leaves_orphans(lake: Lake) -> None:
    import json
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    lake.add_pipeline("shop", "canal-json", maintenance={"triggers": {"commits": 3}})
    lake.route_at(rewritten_rows=0)
    lake.land(
        "shop",
        "001.json",
        [
            canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1),
            canal_message("items", "INSERT", {"id": 1, "v": "x"}, 2),
        ],
    )
    lake.run("shop")
    for number in (2, 3):
        lake.land(
            "shop",
            f"00{number}.json",
            [canal_message("orders", "UPDATE", {"id": 1, "v": f"a{number}"}, 10 * number)],
        )
        lake.run("shop")
    # orders: its create and two merges (3 commits, due); items: its create only.
    assert _debt(lake)[0].commits == 3
    data = Path(_debt(lake)[1].location().removeprefix("file:")) / "data"
    orphan = data / "orphan.parquet"
    orphan.write_bytes(b"left by a failed write")
    old = time.time() - 30 * 86400
    os.utime(orphan, (old, old))

    cli = str(Path(sys.executable).parent / "cdc-ingest")
    flags = ["--config", str(lake.config_path), "--pipeline", "shop", "--json"]
    done = subprocess.run([cli, "maintain", *flags, "--due"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    why = "{} commits of small or delete files since its last maintenance (trigger: 3)"
    # The system tables too: a batch appends once to _cdc_batches, twice to _cdc_checkpoints
    # (its files planned, then committed). items, created once, is not due.
    assert {t["table"]: t["due"] for t in summary["tables"]} == {
        "_cdc_batches": why.format(3),
        "_cdc_checkpoints": why.format(6),
        "orders": why.format(3),
    }
    assert summary["due_only"] is True
    assert "orders: due: " + why.format(3) in done.stdout
    assert _debt(lake)[0] == ReadDebt(data_files=1, delete_files=0, commits=0)
    assert orphan.exists()  # orphan files wait for the full run
    assert lake.rows("orders") == [{"id": 1, "v": "a3"}]

    done = subprocess.run([cli, "maintain", *flags], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    tables = [t["table"] for t in json.loads(done.stdout.strip().splitlines()[-1])["tables"]]
    assert "items" in tables and "orders" in tables
    assert not orphan.exists()
