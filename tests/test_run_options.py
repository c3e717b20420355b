"""The ``_cdc_batches`` row of a run, and the run options: dry run, max files, some tables only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cdc_ingest.config import load_config
from cdc_ingest.landing.zones import list_landed
from cdc_ingest.run.options import RunRefused
from cdc_ingest.state.checkpoints import CheckpointStore
from cdc_ingest.writers.spark_writer import SparkWriter
from formats_under_test import keyless_blob_insert


def change(op: str, table: str, ts: int, before: dict | None, after: dict | None) -> dict:
    """A Debezium JSON change (no schema) of ``shop.<table>``."""
    source = {"connector": "mysql", "db": "shop", "table": table, "ts_ms": ts, "snapshot": "false"}
    return {"op": op, "ts_ms": ts + 5, "before": before, "after": after, "source": source}


def ins(table: str, ts: int, **row: Any) -> dict:
    return change("c", table, ts, None, row)


def upd(table: str, ts: int, before: dict, **row: Any) -> dict:
    return change("u", table, ts, before, row)


def dele(table: str, ts: int, **row: Any) -> dict:
    return change("d", table, ts, row, None)


KEYS = {"keys": {"orders": ["id"], "customers": ["id"]}}


def run(lake: Any, **options: Any) -> Any:
    return lake.run("shop", **options)


def batches(lake: Any) -> list[dict[str, Any]]:
    return [r.asDict() for r in lake.table("_cdc_batches").orderBy("recorded_at").collect()]


def committed(lake: Any) -> int:
    return int(lake.table("_cdc_checkpoints").where("status = 'committed'").count())


@pytest.fixture
def shop(lake: Any) -> Any:
    """Two files: orders and customers changes, one line that is not JSON."""
    lake.add_pipeline("shop", "debezium-json", **KEYS)
    lake.land(
        "shop",
        "001.json",
        [
            ins("orders", 1000, id=1, amount=10),
            ins("orders", 1001, id=2, amount=20),
            ins("customers", 1002, id=7, name="ann"),
            "not json",
        ],
    )
    lake.land(
        "shop",
        "002.json",
        [
            upd("orders", 2000, {"id": 1, "amount": 10}, id=1, amount=11),
            dele("orders", 2001, id=2, amount=20),
            ins("customers", 2002, id=8, name="bob"),
        ],
    )
    return lake


def test_a_batch_writes_one_row_with_its_counts(shop: Any) -> None:
    summary = shop.run("shop")

    [row] = batches(shop)
    assert (row["pipeline"], row["batch_id"], row["partial"], row["resumed"]) == (
        "shop",
        1,
        False,
        False,
    )
    assert [f.rsplit("/", 1)[1] for f in row["files"]] == ["001.json", "002.json"]
    assert (row["lines"], row["messages"], row["dead_lettered"]) == (7, 6, 1)
    # Orders: 1 and 2 inserted then updated/deleted in the same batch collapse to the newest.
    counts = json.loads(row["table_counts"])
    assert {k: (v["inserted"], v["updated"], v["deleted"]) for k, v in counts.items()} == {
        "orders": (1, 0, 0),
        "customers": (2, 0, 0),
    }
    assert counts["orders"]["superseded"] == 2 and counts["orders"]["deleted_absent"] == 1
    assert (row["inserted"], row["updated"], row["deleted"]) == (3, 0, 0)
    assert row["freshness_ms"] == summary.freshness_ms == 2002
    assert row["started_at"] <= row["finished_at"]
    assert row["duration_s"] >= sum(json.loads(row["phase_seconds"]).values()) > 0
    stages = ["plan", "read", "decode", "resolve", "count", "apply", "record"]
    assert sorted(json.loads(row["phase_seconds"])) == sorted(stages)
    assert json.loads(row["summary"]) == json.loads(summary.to_json())
    assert row["kafka_offsets"] == "[]"

    # A later batch writes its own row; a run with nothing new writes none.
    shop.land("shop", "003.json", [upd("customers", 3000, {"id": 7}, id=7, name="anne")])
    second = shop.run("shop")
    assert shop.run("shop").batch_id is None
    rows = batches(shop)
    assert [r["batch_id"] for r in rows] == [1, 2]
    assert (rows[1]["updated"], rows[1]["lines"]) == (1, 1)
    assert json.loads(rows[1]["summary"])["tables"]["customers"]["updated"] == 1
    assert second.tables["customers"].updated == 1


def test_dry_run_on_a_new_lake_creates_nothing(shop: Any) -> None:
    summary = run(shop, dry_run=True)

    assert summary.dry_run and summary.batch_id == 1
    assert (summary.lines, summary.messages, summary.dead_lettered) == (7, 6, 1)
    assert {n: (t.messages, t.created) for n, t in summary.tables.items()} == {
        "orders": (4, True),
        "customers": (2, True),
    }
    assert (
        len(summary.dead_letter_samples) == 1 and "001.json:4: " in summary.dead_letter_samples[0]
    )
    assert "dry run" in summary.render()
    assert shop.spark.sql(f"SHOW NAMESPACES IN {shop.catalog}").count() == 0


def test_dry_run_changes_no_table_and_no_checkpoint(lake: Any) -> None:
    shop = lake
    shop.add_pipeline("shop", "debezium-json", **KEYS)
    shop.land(
        "shop",
        "001.json",
        [ins("orders", 1000, id=1, amount=10), ins("orders", 1001, id=2, amount=20)],
    )
    shop.run("shop")
    shop.land("shop", "002.json", [upd("orders", 2000, {"id": 1, "amount": 10}, id=1, amount=11)])
    snapshots = {t: shop.snapshots(t) for t in ("orders", "_cdc_checkpoints", "_cdc_batches")}

    summary = run(shop, dry_run=True)

    assert summary.batch_id == 2 and summary.tables["orders"].messages == 1
    assert {t: shop.snapshots(t) for t in snapshots} == snapshots
    assert shop.rows("orders") == [{"id": 1, "amount": 10}, {"id": 2, "amount": 20}]
    applied = shop.run("shop")
    assert applied.batch_id == 2 and applied.tables["orders"].updated == 1


def test_max_files_plans_the_oldest_files_first(shop: Any) -> None:
    shop.land("shop", "003.json", [ins("orders", 3000, id=3, amount=30)])

    first = run(shop, max_files=2)

    assert [f.rsplit("/", 1)[1] for f in first.files] == ["001.json", "002.json"]
    assert first.deferred_files == 1 and "1 new files left for later" in first.render()
    assert shop.rows("orders") == [{"id": 1, "amount": 11}]
    second = run(shop, max_files=2)
    assert [f.rsplit("/", 1)[1] for f in second.files] == ["003.json"]
    assert second.deferred_files == 0
    assert shop.rows("orders") == [{"id": 1, "amount": 11}, {"id": 3, "amount": 30}]
    assert [r["batch_id"] for r in batches(shop)] == [1, 2]


def test_tables_apply_only_those_and_leave_the_files_pending(shop: Any) -> None:
    partial = run(shop, tables=("orders", "nosuch"))

    assert partial.only_tables == ["nosuch", "orders"]
    assert set(partial.tables) == {"orders"}
    assert partial.skipped_tables == {"nosuch": "no changes in these files"}
    assert shop.rows("orders") == [{"id": 1, "amount": 11}]
    assert "customers" not in {
        r["tableName"] for r in shop.spark.sql(f"SHOW TABLES IN {shop.catalog}.ods").collect()
    }
    # Nothing committed and nothing dead-lettered: the files are still new for a full run.
    assert committed(shop) == 0 and shop.table("_cdc_dead_letters").count() == 0
    [row] = batches(shop)
    assert row["partial"] and row["only_tables"] == ["nosuch", "orders"]

    full = shop.run("shop")

    assert full.batch_id == 1 and not full.partial and len(full.files) == 2
    assert shop.rows("orders") == [{"id": 1, "amount": 11}]
    assert shop.rows("customers") == [{"id": 7, "name": "ann"}, {"id": 8, "name": "bob"}]
    orders = full.tables["orders"]
    assert (orders.inserted, orders.updated, orders.deleted) == (0, 0, 0)
    assert committed(shop) == 1 and len(shop.dead_letters()) == 1
    assert [r["partial"] for r in batches(shop)] == [True, False]
    assert shop.run("shop").batch_id is None


def test_tables_are_refused_while_a_batch_is_pending(shop: Any) -> None:
    config = load_config(shop.config_path)
    shop.run("shop")  # creates the system tables
    shop.land("shop", "003.json", [ins("orders", 3000, id=3, amount=30)])
    writer = SparkWriter(shop.spark, shop.catalog)
    store = CheckpointStore(shop.spark, shop.catalog, "ods", "shop", writer)
    plan = store.plan(list_landed(config.pipeline("shop").landing), store.load())
    store.record_planned(plan)  # as a run killed before its tables

    with pytest.raises(RunRefused, match="batch 2 was planned and not committed"):
        run(shop, tables=("orders",))
    assert run(shop).resumed


def test_tables_leave_append_only_tables_to_the_full_run(lake: Any) -> None:
    row = {"id": 1, "note": "first"}
    message = keyless_blob_insert(row)
    lake.add_pipeline("shop", "datahub-blob")
    lake.land("shop", "001.json", [message])

    partial = run(lake, tables=("events",))

    assert partial.skipped_tables == {"events": "append-only: only a full run appends its rows"}
    assert partial.tables == {}
    full = lake.run("shop")
    assert full.batch_id == 1 and full.tables["events"].inserted == 1
    assert lake.rows("events") == [row]
