"""History tables (``history: scd2``) through key moves, deletes, schema changes and renames:
Canal messages of a ``shop.items`` table, written by hand, on real Iceberg tables."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from canal_messages import ddl_message, typed_message
from cdc_ingest.stages import StageTimings, recording

TYPES = {"id": "INT", "v": "VARCHAR(10)", "n": "INT"}


def _at(es: int | None) -> datetime | None:
    return None if es is None else datetime(1970, 1, 1) + timedelta(milliseconds=es)


def _item(kind: str, data: dict[str, Any], es: int, old: dict | None = None) -> dict:
    return typed_message("items", kind, data, es, TYPES, old)


def _ddl(sql: str, es: int, kind: str = "ALTER") -> dict:
    return ddl_message("items", sql, kind, es)


def _item_versions(lake: Any, *columns: str, table: str = "items") -> list[tuple[Any, ...]]:
    """(id, *columns, start, end, current, op) of each version of ``table``, by key and start."""
    rows = lake.table(f"{table}_history").collect()
    versions = [
        (
            r["id"],
            *(r[c] for c in columns),
            r["_cdc_valid_from"],
            r["_cdc_valid_to"],
            r["_cdc_current"],
            r["_cdc_op"],
        )
        for r in rows
    ]
    return sorted(versions, key=lambda v: (v[0], v[-4], v[-1] == "delete"))


def test_key_changes_and_a_delete_then_insert_close_and_open_versions(lake, utc_session):
    lake.add_pipeline("shop", "canal-json", table_options={"*": {"history": "scd2"}})
    lake.land(
        "shop",
        "0001.json",
        [_item("INSERT", {"id": 1, "v": "a"}, 1), _item("INSERT", {"id": 2, "v": "b"}, 2)],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "0002.json",
        [
            # Key 2 becomes key 3; key 1 is deleted, then inserted again.
            _item("UPDATE", {"id": 3, "v": "b"}, 3, old={"id": "2"}),
            _item("DELETE", {"id": 1, "v": "a"}, 4),
            _item("INSERT", {"id": 1, "v": "c"}, 5),
        ],
    )
    lake.run("shop")

    assert lake.rows("items") == [{"id": 1, "v": "c"}, {"id": 3, "v": "b"}]
    assert _item_versions(lake, "v") == [
        (1, "a", _at(1), _at(4), False, "insert"),
        (1, "a", _at(4), _at(4), False, "delete"),
        (1, "c", _at(5), None, True, "insert"),
        (2, "b", _at(2), _at(3), False, "insert"),
        # The old key's delete carries only the key the update named.
        (2, None, _at(3), _at(3), False, "delete"),
        (3, "b", _at(3), None, True, "insert"),
    ]


def _column_added_then_dropped(lake: Any) -> None:
    """Two batches of ``items`` with history: an insert, then updates around a column the
    source adds and drops again."""
    lake.add_pipeline("shop", "canal-json", table_options={"items": {"history": "scd2"}})
    lake.land("shop", "0001.json", [_item("INSERT", {"id": 1, "v": "a"}, 1)])
    lake.run("shop")
    lake.land(
        "shop",
        "0002.json",
        [
            _item("UPDATE", {"id": 1, "v": "a2"}, 2),
            _ddl("ALTER TABLE items ADD COLUMN n INT", 3),
            _item("UPDATE", {"id": 1, "v": "a2", "n": 10}, 4),
            _ddl("ALTER TABLE items DROP COLUMN n", 5),
            _item("UPDATE", {"id": 1, "v": "a3"}, 6),
        ],
    )
    lake.run("shop")


def test_columns_added_and_dropped_mid_history_reach_it_at_their_place(lake, utc_session):
    _column_added_then_dropped(lake)

    assert lake.rows("items") == [{"id": 1, "v": "a3"}]
    # Null in the versions before the column was added; kept, with its value, after the
    # source dropped it (the mirror has no such column any more).
    assert _item_versions(lake, "v", "n") == [
        (1, "a", None, _at(1), _at(2), False, "insert"),
        (1, "a2", None, _at(2), _at(4), False, "update"),
        (1, "a2", 10, _at(4), _at(6), False, "update"),
        (1, "a3", None, _at(6), None, True, "update"),
    ]


def test_a_rebuild_across_schema_changes_places_no_version_twice(lake, utc_session):
    """The rebuilt mirror starts empty while its history holds every version: after the first
    statement the rebuild's changes are newer than the mirror's rows, yet the history has them
    all (they are placed among its versions, as a replay's are)."""
    _column_added_then_dropped(lake)
    before = _item_versions(lake, "v", "n")

    rebuilt = lake.run("shop", rebuild_tables=("items",))

    assert rebuilt.replay["mode"] == "rebuild"
    assert lake.rows("items") == [{"id": 1, "v": "a3"}]
    assert rebuilt.tables["items"].history_changes == 0
    # As test_columns_added_and_dropped_mid_history_reach_it_at_their_place has them.
    assert len(before) == 4 and _item_versions(lake, "v", "n") == before


def test_a_renamed_table_takes_its_history_along(lake, utc_session):
    lake.add_pipeline("shop", "canal-json", table_options={"*": {"history": "scd2"}})
    lake.land("shop", "0001.json", [_item("INSERT", {"id": 1, "v": "a"}, 1)])
    lake.run("shop")
    goods = {**_item("UPDATE", {"id": 1, "v": "c"}, 4), "table": "goods"}
    lake.land(
        "shop",
        "0002.json",
        [
            _item("UPDATE", {"id": 1, "v": "b"}, 2),
            _ddl("RENAME TABLE items TO goods", 3, "RENAME"),
            goods,
        ],
    )
    lake.run("shop")

    assert lake.rows("goods") == [{"id": 1, "v": "c"}]
    assert _item_versions(lake, "v", table="goods") == [
        (1, "a", _at(1), _at(2), False, "insert"),
        (1, "b", _at(2), _at(4), False, "update"),
        (1, "c", _at(4), None, True, "update"),
    ]
    tables = {
        r["tableName"] for r in lake.spark.sql(f"SHOW TABLES IN {lake.catalog}.ods").collect()
    }
    assert "items_history" not in tables and "items" not in tables


def test_a_source_table_named_like_a_history_table_is_refused_and_named(lake, utc_session):
    """Both sides of the clash: ``items_history`` sent by the source while ``items`` keeps its
    history there; then ``parts``, mirrored before its history was asked for, whose history name
    ``parts_history`` a mirror holds already; and ``log``, which has no key."""
    lake.add_pipeline("shop", "canal-json")
    parts = {**_item("INSERT", {"id": 7, "v": "p"}, 1), "table": "parts_history"}
    lake.land("shop", "0001.json", [parts, {**parts, "table": "parts"}])
    lake.run("shop")
    lake.add_pipeline("shop", "canal-json", table_options={"*": {"history": "scd2"}})
    clash = {**_item("INSERT", {"id": 9, "v": "x"}, 3), "table": "items_history"}
    lake.land(
        "shop",
        "0002.json",
        [
            _item("INSERT", {"id": 1, "v": "a"}, 2),
            clash,
            {**_item("UPDATE", {"id": 7, "v": "q"}, 4), "table": "parts"},
            # No key: appended, no history (and the summary says so).
            {**_item("INSERT", {"id": 5, "v": "l"}, 5), "table": "log", "pkNames": None},
        ],
    )
    summary = lake.run("shop")

    assert lake.rows("items") == [{"id": 1, "v": "a"}]
    assert _item_versions(lake, "v") == [(1, "a", _at(2), None, True, "insert")]
    assert lake.rows("parts") == [{"id": 7, "v": "p"}]
    assert lake.rows("parts_history") == [{"id": 7, "v": "p"}]
    letters = sorted((d["target_table"], d["reason"]) for d in lake.dead_letters())
    assert letters == [
        (
            "items_history",
            "table items_history could not be applied: it is where table items keeps its history "
            "(history_table): name that history otherwise, or rename the source table",
        ),
        (
            "parts",
            "table parts could not be applied: its history table parts_history (history_table) "
            "is a mirrored table: name the history otherwise, or drop that table",
        ),
    ]
    assert summary.dead_lettered == 2 and summary.tables["items"].history_changes == 1
    assert "1 changes placed in items_history" in summary.render()
    assert lake.rows("log") == [{"id": 5, "v": "l"}]
    assert "log_history" not in {
        r["tableName"] for r in lake.spark.sql(f"SHOW TABLES IN {lake.catalog}.ods").collect()
    }
    assert "no history kept (history: scd2 needs a key" in summary.render()


def test_a_dead_lettered_change_never_reaches_the_history(lake, utc_session):
    lake.add_pipeline("shop", "canal-json", table_options={"items": {"history": "scd2"}})
    lake.land(
        "shop",
        "0001.json",
        [
            _item("INSERT", {"id": 1, "v": "a", "n": 1}, 1),
            # Not an INT: dead-lettered, in the mirror and in the history alike.
            _item("UPDATE", {"id": 1, "v": "bad", "n": "many"}, 2),
            _item("UPDATE", {"id": 1, "v": "b", "n": 1}, 3),
        ],
    )
    summary = lake.run("shop")

    assert lake.rows("items") == [{"id": 1, "v": "b", "n": 1}]
    assert [d["line"] for d in lake.dead_letters()] == [2]
    assert _item_versions(lake, "v") == [
        (1, "a", _at(1), _at(3), False, "insert"),
        (1, "b", _at(3), None, True, "update"),
    ]
    assert summary.tables["items"].history_changes == 2


def test_a_history_name_held_by_another_tables_history_is_refused_and_named(lake, utc_session):
    """``items`` keeps its history in ``h_items``; ``h``, whose template names its history
    ``h_items`` as well, is refused: the history stays the history of ``items`` alone."""
    options = {"items": {"history_table": "h_{table}"}, "h": {"history_table": "{table}_items"}}
    lake.add_pipeline("shop", "canal-json", table_options={"*": {"history": "scd2"}, **options})
    lake.land("shop", "0001.json", [_item("INSERT", {"id": 1, "v": "a"}, 1)])
    first = StageTimings()
    with recording(first):
        lake.run("shop")
    lake.land(
        "shop",
        "0002.json",
        [
            {**_item("INSERT", {"id": 2, "v": "b"}, 2), "table": "h"},
            _item("UPDATE", {"id": 1, "v": "c"}, 3),
        ],
    )
    summary = lake.run("shop")

    assert [(d["target_table"], d["reason"]) for d in lake.dead_letters()] == [
        (
            "h",
            "table h could not be applied: its history table h_items (history_table) is the "
            "history of table items: name the history otherwise, or drop that table",
        )
    ]
    versions = sorted((r["id"], r["v"], r["_cdc_current"]) for r in lake.table("h_items").collect())
    assert versions == [(1, "a", False), (1, "c", True)]
    assert summary.dead_lettered == 1 and summary.tables["items"].history_changes == 1
    # A batch's timings show the history's own stages: a new history appended, then merged
    # (tables applied side by side record theirs in their own threads: one table here).
    assert {"apply/check history table", "apply/history/append to history"} <= set(first.spent)
    lake.land("shop", "0003.json", [_item("UPDATE", {"id": 1, "v": "d"}, 4)])
    second = StageTimings()
    with recording(second):
        lake.run("shop")
    assert {
        "apply/check history table",
        "apply/history/prepare history table",
        "apply/history/count history changes",
        "apply/history/merge into history",
    } <= set(second.spent)
