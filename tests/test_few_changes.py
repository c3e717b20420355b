"""A few changes into a much larger mirror (``apply/few_keys.py``): the classification joins only
the table's rows of the batch's keys, and the MERGE lists those keys in its condition; more
changes into a larger mirror are merged through a bloom filter of their keys
(``apply/runtime_filter.py``). The rows and counts must be what a join of the whole table gives;
spies check that the narrowed path ran.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from cdc_ingest.apply import existing_tables
from conftest import Lake


def _canal(
    kind: str, rows: list[dict[str, Any]], es: int, keys: list[str], table: str = "orders"
) -> dict[str, Any]:
    """A Canal ``kind`` of ``rows`` of ``shop.<table>`` keyed by ``keys``."""
    types = {"id": "INT", "code": "VARCHAR(20)", "v": "VARCHAR(20)"}
    return {
        "data": rows,
        "database": "shop",
        "es": es,
        "isDdl": False,
        "mysqlType": {k: t for k, t in types.items() if k in rows[0]},
        "old": None,
        "pkNames": keys,
        "sql": "",
        "table": table,
        "type": kind,
    }


@pytest.fixture(autouse=True)
def merged_not_rewritten(lake: Lake) -> None:
    """The tables here stand for large ones: merged, not rewritten whole by pyiceberg."""
    lake.route_at(rewritten_rows=50)


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """What the narrowed path did: the semi-joins built, the conditions listed."""
    from cdc_ingest.apply import classify, few_keys, keyed_writes

    calls: dict[str, list[Any]] = {"semi_joins": [], "listed": []}

    def rows_of_keys(*args: Any) -> Any:
        calls["semi_joins"].append(args[2])
        return few_keys.rows_of_keys(*args)

    def listed_keys(*args: Any) -> str:
        listed = few_keys.listed_keys(*args)
        calls["listed"].append(listed)
        return listed

    monkeypatch.setattr(classify, "rows_of_keys", rows_of_keys)
    monkeypatch.setattr(existing_tables, "rows_of_keys", rows_of_keys)
    monkeypatch.setattr(keyed_writes, "listed_keys", listed_keys)
    return calls


@pytest.fixture
def path_taken(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, lake: Lake
) -> tuple[str, list[str]]:
    """The apply path a parametrized test runs ("one table": ``keyed.apply_table``; "a group":
    ``existing_tables``, each table it writes recorded in the list returned)."""

    path: str = request.param
    written: list[str] = []
    if path == "one table":
        lake.route_at(group_rows=2)  # applied by keyed.apply_table
    else:
        write_small = existing_tables.HoldingGroup.write_small

        def recorded(self: Any, table: Any, *args: Any) -> bool:
            written.append(table.target.name)
            return write_small(self, table, *args)

        monkeypatch.setattr(existing_tables.HoldingGroup, "write_small", recorded)
    return path, written


def _and_items(path: str, changes: list[dict[str, Any]], es: int) -> list[dict[str, Any]]:
    """``changes``, and on the group path a change of ``items`` key 1 at ``es``: a second table
    of the same columns (a group of one table larger than a rewrite is applied alone)."""
    if path == "one table":
        return changes
    return [*changes, _canal("INSERT", [{"id": 1, "v": f"i{es}"}], es, ["id"], "items")]


def _four_hundred_rows(lake: Lake, path: str, *more: dict[str, Any]) -> None:
    """A first batch: ``orders`` keys 0-399 at es 10 (and ``items``), then ``more`` alone."""
    lake.add_pipeline("shop", "canal-json")
    rows = [{"id": i, "v": "a"} for i in range(400)]
    lake.land("shop", "001.json", _and_items(path, [_canal("INSERT", rows, 10, ["id"])], 10))
    if more:
        lake.land("shop", "002.json", list(more))
    lake.run("shop")


def test_a_few_changes_into_a_large_table_apply_as_a_whole_table_join_would(
    lake: Lake, spied: dict[str, list[Any]]
) -> None:
    lake.add_pipeline("shop", "canal-json")
    rows = [{"id": i, "v": "a"} for i in range(1, 201)]
    lake.land("shop", "001.json", [_canal("INSERT", rows, 10, ["id"])])
    lake.run("shop")
    assert spied["semi_joins"] == []  # a table this run created: nothing to read
    lake.land(
        "shop",
        "002.json",
        [
            _canal("UPDATE", [{"id": 5, "v": "newer"}], 20, ["id"]),
            _canal("UPDATE", [{"id": 6, "v": "older"}], 5, ["id"]),
            _canal("DELETE", [{"id": 7, "v": "a"}], 20, ["id"]),
            _canal("INSERT", [{"id": 500, "v": "new"}], 20, ["id"]),
        ],
    )
    summary = lake.run("shop")

    counts = summary.tables["orders"]
    assert (counts.updated, counts.older, counts.deleted, counts.inserted) == (1, 1, 1, 1)
    held = {r["id"]: r["v"] for r in lake.rows("orders")}
    assert len(held) == 200 and 7 not in held
    assert (held[5], held[6], held[8], held[500]) == ("newer", "a", "a", "new")
    assert spied["semi_joins"] == [("id",)]
    # Every key the MERGE writes: the update, the delete and the insert (not the older change).
    (listed,) = spied["listed"]
    assert listed.startswith(" AND t.`id` IN (") and listed.endswith(")")
    assert sorted(listed.removeprefix(" AND t.`id` IN (")[:-1].split(", ")) == ["5", "500", "7"]


def test_listed_text_keys_of_a_composite_key_are_literals(
    lake: Lake, spied: dict[str, list[Any]]
) -> None:
    lake.add_pipeline("shop", "canal-json")
    keys = ["id", "code"]
    rows = [{"id": i % 3, "code": f"c{i}", "v": "a"} for i in range(100)]
    rows.append({"id": 1, "code": "o'brien\\x", "v": "a"})
    lake.land("shop", "001.json", [_canal("INSERT", rows, 10, keys)])
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            _canal("UPDATE", [{"id": 1, "code": "o'brien\\x", "v": "quoted"}], 20, keys),
            _canal("DELETE", [{"id": 2, "code": "c2", "v": "a"}], 20, keys),
        ],
    )
    lake.run("shop")

    held = {(r["id"], r["code"]): r["v"] for r in lake.rows("orders")}
    assert held[(1, "o'brien\\x")] == "quoted"
    assert (2, "c2") not in held and held[(0, "c3")] == "a" and len(held) == 100
    assert spied["semi_joins"] == [("id", "code")]
    (listed,) = spied["listed"]
    assert listed.startswith(" AND (t.`id`, t.`code`) IN (")
    assert "(CAST(1 AS bigint), CAST('o\\'brien\\\\x' AS string))" in listed


def test_tables_classified_together_read_only_the_rows_of_a_few_changes(
    lake: Lake, spied: dict[str, list[Any]]
) -> None:
    lake.add_pipeline("shop", "canal-json")
    rows = [{"id": i, "v": "a"} for i in range(1, 201)]
    lake.land(
        "shop",
        "001.json",
        [_canal("INSERT", rows, 10, ["id"]), _canal("INSERT", rows, 10, ["id"], "items")],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            _canal("UPDATE", [{"id": 5, "v": "newer"}], 20, ["id"]),
            _canal("UPDATE", [{"id": 6, "v": "older"}], 5, ["id"], "items"),
            _canal("DELETE", [{"id": 7, "v": "a"}], 20, ["id"], "items"),
        ],
    )
    summary = lake.run("shop")

    assert (summary.tables["orders"].updated, summary.tables["items"].older) == (1, 1)
    assert summary.tables["items"].deleted == 1
    orders = {r["id"]: r["v"] for r in lake.rows("orders")}
    items = {r["id"]: r["v"] for r in lake.rows("items")}
    assert (len(orders), orders[5], orders[6]) == (200, "newer", "a")
    assert (len(items), items[5], items[6], 7 in items) == (199, "a", "a", False)
    assert spied["semi_joins"] == [("id",)]  # one for the group
    assert sorted(spied["listed"]) == [" AND t.`id` IN (5)", " AND t.`id` IN (7)"]


@pytest.fixture
def merge_plans(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """The physical plan of every ``MERGE INTO``, by the table's name (``orders``,
    ``_cdc_tombstones``), explained just before it runs (the session's settings then are the
    statement's)."""
    from pyspark.sql import SparkSession

    plans: dict[str, list[str]] = {}
    run_sql = SparkSession.sql

    def sql(self: SparkSession, statement: str, *args: Any, **kwargs: Any) -> Any:
        if statement.startswith("MERGE INTO"):
            name = statement.split()[2].rsplit(".", 1)[-1].strip("`")
            plan = run_sql(self, f"EXPLAIN {statement}").collect()[0][0]
            plans.setdefault(name, []).append(plan)
        return run_sql(self, statement, *args, **kwargs)

    monkeypatch.setattr(SparkSession, "sql", sql)
    return plans


@pytest.mark.parametrize("path_taken", ["one table", "a group"], indirect=True)
def test_many_changes_into_a_larger_table_merge_through_a_bloom_filter_of_their_keys(
    lake: Lake, merge_plans: dict[str, list[str]], path_taken: tuple[str, list[str]]
) -> None:
    path, written = path_taken
    _four_hundred_rows(lake, path)
    # 60 changes, 50 of them merged, into 400 rows: too many to list (20 times as many rows are
    # needed), few enough for the filter (4 times).
    changes = [_canal("UPDATE", [{"id": i, "v": "newer"}], 20, ["id"]) for i in range(30)]
    changes += [_canal("UPDATE", [{"id": i, "v": "older"}], 5, ["id"]) for i in range(30, 40)]
    changes += [_canal("DELETE", [{"id": i, "v": "a"}], 20, ["id"]) for i in range(40, 50)]
    changes += [_canal("INSERT", [{"id": i, "v": "new"}], 20, ["id"]) for i in range(900, 910)]
    lake.land("shop", "002.json", _and_items(path, changes, 20))
    broadcast = lake.spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    summary = lake.run("shop")
    assert written == ([] if path == "one table" else ["items", "orders"])

    # The filter's settings were the MERGE's only.
    assert lake.spark.conf.get("spark.sql.autoBroadcastJoinThreshold") == broadcast
    counts = summary.tables["orders"]
    assert (counts.updated, counts.older, counts.deleted, counts.inserted) == (30, 10, 10, 10)
    held = {r["id"]: r["v"] for r in lake.rows("orders")}
    assert len(held) == 400 and not set(range(40, 50)) & set(held)
    assert {held[i] for i in range(30)} == {"newer"} and held[35] == held[399] == "a"
    assert {held[i] for i in range(900, 910)} == {"new"}
    (plan,) = merge_plans["orders"]
    assert "might_contain" in plan and "bloom_filter_agg" in plan
    # Sized for the 50 merged changes, at eight bits each.
    assert "bloom_filter_agg(xxhash64(id" in plan and ", 50, 400, 0, 0)" in plan


@pytest.mark.parametrize("path_taken", ["one table", "a group"], indirect=True)
def test_changes_that_only_insert_keys_are_appended_to_the_table(
    lake: Lake, merge_plans: dict[str, list[str]], path_taken: tuple[str, list[str]]
) -> None:
    path, written = path_taken
    _four_hundred_rows(lake, path)
    # Ten new keys, and an insert of a held key older than its row (not applied).
    changes = [_canal("INSERT", [{"id": i, "v": "new"}], 20, ["id"]) for i in range(900, 910)]
    changes.append(_canal("INSERT", [{"id": 5, "v": "late"}], 5, ["id"]))
    lake.land("shop", "002.json", _and_items(path, changes, 20))
    summary = lake.run("shop")

    assert written == ([] if path == "one table" else ["items", "orders"])
    counts = summary.tables["orders"]
    assert (counts.inserted, counts.older, counts.updated) == (10, 1, 0)
    assert "orders" not in merge_plans
    held = {r["id"]: r["v"] for r in lake.rows("orders")}
    assert len(held) == 410 and held[5] == "a" and {held[i] for i in range(900, 910)} == {"new"}
    (last,) = lake.spark.sql(
        f"SELECT operation, summary['cdc.counts'] AS counts "
        f"FROM {lake.catalog}.ods.orders.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).collect()
    # One append, which carries the batch's counts (what a resumed batch reads).
    assert last["operation"] == "append" and '"inserted": 10' in last["counts"]
    # An update among them takes the MERGE.
    lake.land(
        "shop",
        "003.json",
        _and_items(path, [_canal("UPDATE", [{"id": 7, "v": "b"}], 30, ["id"])], 30),
    )
    assert lake.run("shop").tables["orders"].updated == 1
    assert len(merge_plans["orders"]) == 1


@pytest.mark.parametrize("path_taken", ["one table", "a group"], indirect=True)
def test_tombstones_of_keys_deleted_for_the_first_time_are_appended(
    lake: Lake, merge_plans: dict[str, list[str]], path_taken: tuple[str, list[str]]
) -> None:
    path, written = path_taken
    _four_hundred_rows(lake, path, _canal("DELETE", [{"id": 900, "v": "a"}], 11, ["id"]))
    # Ten deletes of keys never deleted, an insert older than the tombstone of its key (not
    # applied: the tombstone stays), an update: no tombstone to move or clear.
    changes = [_canal("DELETE", [{"id": i, "v": "a"}], 20, ["id"]) for i in range(10)]
    changes.append(_canal("INSERT", [{"id": 900, "v": "late"}], 5, ["id"]))
    changes.append(_canal("UPDATE", [{"id": 20, "v": "b"}], 20, ["id"]))
    lake.land("shop", "003.json", _and_items(path, changes, 20))
    summary = lake.run("shop")

    assert written == ([] if path == "one table" else ["items", "orders"])
    counts = summary.tables["orders"]
    assert (counts.deleted, counts.older, counts.updated) == (10, 1, 1)
    assert "orders" in merge_plans and "_cdc_tombstones" not in merge_plans
    tombstones = sorted((r["key"], r["batch_id"]) for r in lake.rows("_cdc_tombstones"))
    assert tombstones == sorted([('["900"]', 1)] + [(f'["{i}"]', 2) for i in range(10)])
    # An insert newer than its key's tombstone clears it: that takes the MERGE.
    back = [_canal("INSERT", [{"id": 900, "v": "back"}], 30, ["id"])]
    lake.land("shop", "004.json", _and_items(path, back, 30))
    assert lake.run("shop").tables["orders"].inserted == 1
    assert len(merge_plans["_cdc_tombstones"]) == 1
    assert {r["key"] for r in lake.rows("_cdc_tombstones", "key")} == {
        f'["{i}"]' for i in range(10)
    }
    held = {r["id"]: r["v"] for r in lake.rows("orders")}
    assert len(held) == 391 and held[900] == "back" and held[20] == "b" and 5 not in held


def test_tombstones_are_broadcast_to_the_changes_and_merged_through_a_bloom_filter(
    lake: Lake, merge_plans: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdc_ingest.apply import classify as classification
    from cdc_ingest.apply import keyed

    classified: list[str] = []
    original = classification.classify

    def classify(*args: Any, **kwargs: Any) -> Any:
        frame = original(*args, **kwargs)
        classified.append(frame._jdf.queryExecution().optimizedPlan().toString())
        return frame

    monkeypatch.setattr(keyed, "classify", classify)
    lake.add_pipeline("shop", "canal-json")
    rows = [{"id": i, "v": "a"} for i in range(400)]
    lake.land("shop", "001.json", [_canal("INSERT", rows, 10, ["id"])])
    lake.run("shop")
    deletes = [_canal("DELETE", [{"id": i, "v": "a"}], 20, ["id"]) for i in range(100)]
    lake.land("shop", "002.json", deletes)
    lake.run("shop")  # the first tombstones are appended: no MERGE
    assert "_cdc_tombstones" not in merge_plans
    # 20 deletes, one of a key deleted before (older than its tombstone), and an insert that
    # clears a tombstone: 21 tombstones set or cleared among the 100 held.
    changes = [_canal("DELETE", [{"id": i, "v": "a"}], 30, ["id"]) for i in range(200, 220)]
    changes.append(_canal("DELETE", [{"id": 5, "v": "a"}], 15, ["id"]))
    changes.append(_canal("INSERT", [{"id": 7, "v": "back"}], 40, ["id"]))
    lake.land("shop", "003.json", changes)
    summary = lake.run("shop")

    counts = summary.tables["orders"]
    assert (counts.deleted, counts.older, counts.inserted) == (20, 1, 1)
    held = {r["id"]: r["v"] for r in lake.rows("orders")}
    assert len(held) == 281 and held[7] == "back" and 5 not in held and 210 not in held
    tombstones = {r["key"] for r in lake.rows("_cdc_tombstones", "key")}
    assert len(tombstones) == 119 and '["7"]' not in tombstones and '["210"]' in tombstones
    (plan,) = merge_plans["_cdc_tombstones"]
    assert "might_contain" in plan and ", 21, 168, 0, 0)" in plan
    # The third batch's classification: its tombstones joined by broadcast.
    joined = r"Join LeftOuter, \(_cdc_key#\d+ = _d_key#\d+\), rightHint=\(strategy=broadcast\)"
    assert re.search(joined, classified[-1]), classified[-1]


def test_a_tables_changes_are_collapsed_in_the_partitions_of_their_join_with_its_rows(
    lake: Lake, spied: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdc_ingest.apply import classify as classification
    from cdc_ingest.apply import keyed
    from cdc_ingest.run import batch

    lake.route_at(group_rows=10)  # applied by keyed.apply_table
    # A partition per file and no join broadcast by size, as a large batch into a large table
    # has: a tiny one is one partition, which any collapse reads without an exchange.
    monkeypatch.setattr(batch, "ONE_PARTITION", 0)
    threshold = lake.spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    lake.spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    newest_plans: list[str] = []
    original = classification.classify

    def classify(spark: Any, newest: Any, *args: Any) -> Any:
        newest_plans.append(newest._jdf.queryExecution().executedPlan().toString())
        return original(spark, newest, *args)

    monkeypatch.setattr(keyed, "classify", classify)
    lake.add_pipeline("shop", "canal-json")
    rows = [{"id": i, "v": "a"} for i in range(400)]
    lake.land("shop", "001.json", [_canal("INSERT", rows, 10, ["id"])])
    lake.run("shop")
    # 20 keys changed twice each (the newer wins) and one older change, into 400 rows.
    changes = [_canal("UPDATE", [{"id": i, "v": "first"}], 20, ["id"]) for i in range(20)]
    changes += [_canal("UPDATE", [{"id": i, "v": "second"}], 30, ["id"]) for i in range(20)]
    changes.append(_canal("UPDATE", [{"id": 30, "v": "older"}], 5, ["id"]))
    lake.land("shop", "002.json", changes[:20])
    lake.land("shop", "003.json", changes[20:])
    try:
        summary = lake.run("shop")
    finally:
        lake.spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)

    counts = summary.tables["orders"]
    assert (counts.updated, counts.superseded, counts.older) == (20, 20, 1)
    held = {r["id"]: r["v"] for r in lake.rows("orders")}
    assert {held[i] for i in range(20)} == {"second"} and held[30] == "a" and len(held) == 400
    # The changes' uncollapsed keys keep the table's rows to theirs (a broadcast semi-join),
    # and the collapse reads the partitions of the join by the key: no exchange by key text.
    assert spied["semi_joins"] == [("id",)]
    plan = newest_plans[-1]
    assert "hashpartitioning(id#" in plan and "hashpartitioning(_cdc_key" not in plan, plan
