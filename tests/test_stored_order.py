"""The ordering value stored as ``binary`` (``cdc_ingest.ordering``), and the migration of tables
written when it was an ``array<bigint>`` (``state/order_migration.py``).

The legacy tables are made the way the previous release left them: the list column named
``_cdc_order`` in the mirror and in ``_cdc_tombstones``, with orders written by hand.
"""

from __future__ import annotations

from typing import Any

import pytest
from canal_messages import canal_message
from conftest import Lake
from formats_under_test import keyless_blob_insert
from test_replay import land_on, replay, with_order


def test_stored_bytes_and_their_order_are_the_lists() -> None:
    from cdc_ingest import ordering

    # Eight bytes per element, big-endian, sign bit flipped: written out by hand.
    assert ordering.encode([1]).hex() == "8000000000000001"
    assert ordering.encode([-1]).hex() == "7fffffffffffffff"
    assert ordering.encode([0, 2**63 - 1]).hex() == "8000000000000000ffffffffffffffff"
    assert ordering.encode([-(2**63)]).hex() == "0000000000000000"
    assert ordering.decode(bytes.fromhex("7ffffffffffffffb8000000000000007")) == [-5, 7]
    # Compared as Spark compares the lists: element by element, a prefix first.
    ascending: list[list[int | None]] = [
        [-(2**63)],
        [-5, 7],
        [-1],
        [0],
        [0, -1],
        [0, 0],
        [1],
        [1, 0, 0],
        [2**40],
        [2**63 - 1],
    ]
    shuffled = [ascending[i] for i in (5, 0, 9, 3, 7, 1, 8, 2, 6, 4)]
    assert sorted(shuffled, key=ordering.encode) == ascending


def test_spark_stores_the_same_bytes(spark: Any) -> None:
    from cdc_ingest import ordering

    row = spark.sql(
        f"SELECT {ordering.encoded_sql('array(CAST(-5 AS BIGINT))', '7')} AS o, "
        f"{ordering.encoded_sql('array(CAST(NULL AS BIGINT), CAST(2 AS BIGINT))')} AS n"
    ).collect()[0]
    assert bytes(row["o"]).hex() == "7ffffffffffffffb8000000000000007"
    # A null element (Debezium's lsn from MySQL, say) is stored as the smallest bigint.
    assert bytes(row["n"]).hex() == "00000000000000008000000000000002"


def test_stored_bytes_sort_as_spark_sorts_the_lists(spark: Any) -> None:
    from cdc_ingest import ordering

    # Debezium's nine elements with nulls, shorter lists, and one longer than any format's.
    lists = [
        [1, 1000, None, 7, None, None, None, None, 2000],
        [1, 1000, 3, 7, None, None, None, None, 2000],
        [1, 1000, 3, 7, 0, None, None, None, 2000],
        [0, 5, None, None, None, None, None, None, 1],
        [1, 999, 9, 9, 9, 9, 9, 9, 9],
        [None, 4],
        [3],
        [],
        [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1],
        [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2],
    ]
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(lists)], "i int, o array<bigint>")
    stored = frame.selectExpr("i", "o", f"{ordering.encoded_sql('o')} AS b")
    by_list = [r["i"] for r in stored.orderBy("o", "i").collect()]
    by_bytes = [r["i"] for r in stored.orderBy("b", "i").collect()]
    assert by_list == [7, 5, 3, 4, 0, 1, 2, 9, 8, 6]  # Spark's order of the lists, by hand
    assert by_bytes == by_list
    for r in stored.collect():
        assert bytes(r["b"]) == ordering.encode(r["o"])


def _legacy_orders(lake: Lake, table: str, orders: dict[str, str], where: str = "id") -> None:
    """Turn ``table``'s ``_cdc_order`` into the list it was before, holding ``orders`` (the value
    of ``where`` as SQL text -> the list as SQL text)."""
    identifier = f"{lake.catalog}.ods.{table}"
    cases = " ".join(f"WHEN {where} = {k} THEN {v}" for k, v in orders.items())
    lake.spark.sql(f"ALTER TABLE {identifier} ADD COLUMN _legacy array<bigint> AFTER _cdc_order")
    lake.spark.sql(f"UPDATE {identifier} SET _legacy = CASE {cases} END")
    lake.spark.sql(f"ALTER TABLE {identifier} DROP COLUMN _cdc_order")
    lake.spark.sql(f"ALTER TABLE {identifier} RENAME COLUMN _legacy TO _cdc_order")


def _column_type(lake: Lake, table: str, column: str = "_cdc_order") -> str | None:
    types = dict(lake.table(table).dtypes)
    return types.get(column)


@pytest.mark.parametrize("stopped", [False, True], ids=["legacy", "stopped after adding"])
def test_a_legacy_mirror_and_its_tombstones_keep_their_order_through_the_migration(
    lake: Lake, stopped: bool
) -> None:
    from cdc_ingest import ordering

    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [canal_message("orders", "INSERT", {"id": i, "v": "a"}, 10) for i in (1, 2, 3, 4)]
        + [canal_message("orders", "DELETE", {"id": 4, "v": "a"}, 20)],
    )
    lake.run("shop")
    _legacy_orders(
        lake,
        "orders",
        {
            "1": "array(100L, 1L, 0L, 1L, 0L)",
            "2": "array(10L, 1L, 0L, 2L, 0L)",
            "3": "array(10L, 1L, 0L, 3L, 0L)",
        },
    )
    _legacy_orders(lake, "_cdc_tombstones", {"'[\"4\"]'": "array(50L, 1L, 0L, 5L, 0L)"}, "key")
    if stopped:  # a run stopped after the migration's first commit
        lake.spark.sql(f"ALTER TABLE {lake.catalog}.ods.orders ADD COLUMN _cdc_order_binary binary")
    assert _column_type(lake, "orders") == "array<bigint>"

    lake.land(
        "shop",
        "002.json",
        [
            canal_message("orders", "UPDATE", {"id": 1, "v": "older"}, 90),
            canal_message("orders", "UPDATE", {"id": 2, "v": "newer"}, 30),
            canal_message("orders", "INSERT", {"id": 4, "v": "older"}, 40),
            canal_message("orders", "INSERT", {"id": 5, "v": "new"}, 30),
        ],
    )
    summary = lake.run("shop")

    assert lake.rows("orders") == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "newer"},
        {"id": 3, "v": "a"},
        {"id": 5, "v": "new"},
    ]
    counts = summary.tables["orders"]
    assert (counts.updated, counts.inserted, counts.older) == (1, 1, 2)
    for table in ("orders", "_cdc_tombstones"):
        assert _column_type(lake, table) == "binary"
        assert _column_type(lake, table, "_cdc_order_binary") is None
    orders = {
        r["id"]: ordering.decode(r["_cdc_order"])
        for r in lake.table("orders").select("id", "_cdc_order").collect()
    }
    assert orders[1] == [100, 1, 0, 1, 0] and orders[3] == [10, 1, 0, 3, 0]
    assert orders[2] == [30, 2, 0, 2, 0]  # batch 2, its first file (002.json), line 2
    # The migration's rewrite left no delete file (the hand-made legacy orders wrote some).
    migrated = lake.spark.sql(f"SELECT summary FROM {lake.catalog}.ods.orders.snapshots").collect()
    summaries = [r["summary"] for r in migrated if "cdc.migration" in r["summary"]]
    assert [s["total-delete-files"] for s in summaries] == ["0"]
    tombstones = lake.table("_cdc_tombstones").collect()
    assert [ordering.decode(r["_cdc_order"]) for r in tombstones] == [[50, 1, 0, 5, 0]]

    # The next batch finds nothing to migrate and applies by the stored order.
    lake.land("shop", "003.json", [canal_message("orders", "UPDATE", {"id": 1, "v": "b"}, 101)])
    lake.run("shop")
    assert lake.rows("orders")[0] == {"id": 1, "v": "b"}


def test_a_replay_matches_rows_of_a_legacy_append_only_table(lake: Lake) -> None:
    from cdc_ingest import ordering

    lake.add_pipeline("events", "datahub-blob")
    land_on(lake, "001.json", 20, [keyless_blob_insert({"id": 1, "note": "first"})], "events")
    land_on(lake, "002.json", 21, [keyless_blob_insert({"id": 2, "note": "second"})], "events")
    lake.run("events")
    lake.run("events")
    # The lists the previous release wrote: the same values.
    stored = lake.table("events").select("id", "_cdc_order").collect()
    lists = {str(r["id"]): ordering.decode(r["_cdc_order"]) for r in stored}
    _legacy_orders(
        lake, "events", {k: f"array({', '.join(f'{v}L' for v in vs)})" for k, vs in lists.items()}
    )
    original = with_order(lake, "events")

    summary = replay(lake, None, None, "events")

    assert summary.already_applied == 2
    assert with_order(lake, "events") == original


def test_a_row_another_writer_adds_during_the_migration_is_not_lost(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdc_ingest.state import order_migration

    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 10)])
    lake.run("shop")
    _legacy_orders(lake, "orders", {"1": "array(10L, 1L, 0L, 1L, 0L)"})
    from cdc_ingest.state.tables import current_snapshot_id as read_at

    def then_another_writer_commits(spark: Any, identifier: str) -> Any:
        snapshot = read_at(spark, identifier)
        if identifier.endswith("`orders`"):
            spark.sql(
                f"INSERT INTO {identifier} "
                "(id, v, _cdc_order, _cdc_order_binary, _cdc_op, _cdc_batch_id) "
                "VALUES (2, 'other', array(5L), NULL, 'c', 0)"
            )
        return snapshot

    monkeypatch.setattr(order_migration, "current_snapshot_id", then_another_writer_commits)
    lake.land("shop", "002.json", [canal_message("orders", "UPDATE", {"id": 1, "v": "b"}, 20)])
    with pytest.raises(Exception, match="conflicting files"):
        lake.run("shop")
    assert lake.rows("orders") == [{"id": 1, "v": "a"}, {"id": 2, "v": "other"}]
    monkeypatch.undo()

    lake.run("shop")  # the rerun migrates, then applies the batch
    assert lake.rows("orders") == [{"id": 1, "v": "b"}, {"id": 2, "v": "other"}]
    assert _column_type(lake, "orders") == "binary"
