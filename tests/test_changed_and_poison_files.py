"""Landed files that change, vanish or are corrupt: caught and named; the rest flows."""

from __future__ import annotations

import gzip
import os
from typing import Any

from cdc_ingest.config import load_config
from cdc_ingest.landing.zones import list_landed
from cdc_ingest.state.checkpoints import CheckpointStore
from cdc_ingest.writers.spark_writer import SparkWriter
from formats_under_test import KEY, TABLE, Changes


def _insert_lines(c: Changes, first: int, count: int) -> list[str]:
    return [
        c.insert({"id": k, "owner": f"o{k}", "balance": k}, 1000 + k)
        for k in range(first, first + count)
    ]


def _plan_and_die(lake: Any, pipeline: str) -> None:
    """What a run killed right after its plan commit leaves: a planned batch, no table changed."""
    config = load_config(lake.config_path)
    writer = SparkWriter(lake.spark, lake.catalog)
    store = CheckpointStore(lake.spark, lake.catalog, "ods", pipeline, writer)
    store.record_planned(store.plan(list_landed(config.pipeline(pipeline).landing), store.load()))


def _statuses(lake: Any) -> list[tuple[int, str, str]]:
    rows = lake.table("_cdc_checkpoints").where("file is not null").collect()
    return sorted((r["batch_id"], r["status"], os.path.basename(r["file"])) for r in rows)


def test_a_planned_file_truncated_before_it_is_read_is_left_out_and_planned_again(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", keys={TABLE: [KEY]})
    lake.land("accounts", "000.json", _insert_lines(c, 100, 1))
    lake.run("accounts")  # the system tables
    lake.land("accounts", "001.json", _insert_lines(c, 1, 4))
    second = lake.land("accounts", "002.json", _insert_lines(c, 5, 4))
    _plan_and_die(lake, "accounts")
    second.write_text("".join(line + "\n" for line in _insert_lines(c, 5, 2)))

    resumed = lake.run("accounts")

    assert resumed.resumed and resumed.batch_id == 2
    assert list(resumed.changed_files) == [second.as_uri()]
    assert "bytes when planned" in resumed.changed_files[second.as_uri()]
    assert (resumed.lines, resumed.tables[TABLE].inserted) == (4, 4)
    assert "1 files left out, changed after they were planned" in resumed.render()
    assert sorted(r["id"] for r in lake.rows(TABLE, "id")) == [1, 2, 3, 4, 100]
    # Not seen: the next batch plans the file with what it holds now.
    again = lake.run("accounts")
    assert again.batch_id == 3 and again.files == [second.as_uri()]
    assert sorted(r["id"] for r in lake.rows(TABLE, "id")) == [1, 2, 3, 4, 5, 6, 100]
    assert _statuses(lake) == [
        (1, "applied", "000.json"),
        (1, "planned", "000.json"),
        (2, "applied", "001.json"),
        (2, "changed", "002.json"),
        (2, "planned", "001.json"),
        (2, "planned", "002.json"),
        (3, "applied", "002.json"),
        (3, "planned", "002.json"),
    ]


def test_a_planned_file_rewritten_with_the_same_size_is_caught_by_its_fingerprint(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", keys={TABLE: [KEY]})
    lake.land("accounts", "000.json", _insert_lines(c, 100, 1))
    lake.run("accounts")
    path = lake.land("accounts", "001.json", _insert_lines(c, 1, 2))
    _plan_and_die(lake, "accounts")
    text = path.read_text()
    path.write_text(text.replace('"o1"', '"x1"'))

    resumed = lake.run("accounts")

    assert resumed.changed_files == {path.as_uri(): "same size, other content than when planned"}
    assert resumed.lines == 0 and TABLE not in resumed.tables
    assert lake.run("accounts").tables[TABLE].inserted == 2
    assert lake.rows(TABLE, "id", "owner")[0] == {"id": 1, "owner": "x1"}


def test_a_planned_file_deleted_before_it_is_read_is_recorded_missing(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", keys={TABLE: [KEY]})
    lake.land("accounts", "000.json", _insert_lines(c, 100, 1))
    lake.run("accounts")
    lake.land("accounts", "001.json", _insert_lines(c, 1, 2))
    gone = lake.land("accounts", "002.json", _insert_lines(c, 3, 2))
    _plan_and_die(lake, "accounts")
    gone.unlink()

    resumed = lake.run("accounts")

    assert resumed.missing_files == {gone.as_uri(): "deleted after it was planned"}
    assert "1 files left out, deleted after they were planned" in resumed.render()
    assert resumed.tables[TABLE].inserted == 2
    assert (2, "missing", "002.json") in _statuses(lake)
    assert lake.run("accounts").batch_id is None


def test_lines_appended_to_an_applied_file_are_reported(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", keys={TABLE: [KEY]})
    path = lake.land("accounts", "001.json", _insert_lines(c, 1, 2))
    size = path.stat().st_size
    lake.run("accounts")
    with path.open("a") as handle:
        handle.write(_insert_lines(c, 3, 1)[0] + "\n")

    later = lake.run("accounts")

    assert later.batch_id is None
    assert later.changed_after_applied == {
        path.as_uri(): f"applied with {size} bytes by batch 1, {path.stat().st_size} bytes now"
    }
    assert "1 files changed after they were applied (not applied)" in later.render()


def test_a_corrupt_gzip_file_is_one_dead_letter_and_the_other_files_apply(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", keys={TABLE: [KEY]})
    good = "".join(line + "\n" for line in _insert_lines(c, 1, 3)).encode()
    (lake.landing("accounts") / "001.json.gz").write_bytes(gzip.compress(good))
    packed = gzip.compress("".join(line + "\n" for line in _insert_lines(c, 10, 50)).encode())
    bad = lake.landing("accounts") / "002.json.gz"
    bad.write_bytes(packed[: len(packed) // 2])
    lake.land("accounts", "003.json", _insert_lines(c, 4, 1))

    summary = lake.run("accounts")

    # None of the truncated file's lines are applied: its 50 changes are one dead letter.
    assert sorted(r["id"] for r in lake.rows(TABLE, "id")) == [1, 2, 3, 4]
    assert (summary.lines, summary.messages, summary.dead_lettered) == (5, 4, 1)
    [letter] = lake.dead_letters()
    assert (letter["file"], letter["line"], letter["raw"]) == (bad.as_uri(), 0, None)
    assert letter["reason"].startswith(
        "file is not a readable gzip stream, none of its lines read: "
    )
    # The file is applied (as one dead letter): the pipeline does not stay stuck on it.
    assert lake.run("accounts").batch_id is None


def _canal(table: str, data: dict[str, Any], es: int) -> dict[str, Any]:
    return {
        "data": [data],
        "database": "shop",
        "es": es,
        "isDdl": False,
        "mysqlType": {c: "INT" if c.lower() == "id" else "VARCHAR(20)" for c in data},
        "old": None,
        "pkNames": ["id"],
        "sql": "",
        "table": table,
        "type": "INSERT",
    }


def test_a_table_name_too_long_for_the_catalog_is_dead_lettered_and_other_tables_apply(lake):
    lake.add_pipeline("shop", "canal-json")
    long_name = "t" * 300
    lake.land(
        "shop",
        "001.json",
        [_canal(long_name, {"id": 1, "v": "a"}, 1), _canal("orders", {"id": 1, "v": "b"}, 2)],
    )

    summary = lake.run("shop")

    assert lake.rows("orders") == [{"id": 1, "v": "b"}]
    assert (summary.messages, summary.dead_lettered) == (1, 1)
    [letter] = lake.dead_letters()
    assert letter["line"] == 1
    assert letter["reason"] == (
        f"target table name '{'t' * 40}...' is 300 bytes long; a table name may have at most 255"
    )


def test_columns_differing_only_in_case_are_dead_lettered_and_the_rest_applies(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [_canal("orders", {"id": 1, "v": "a"}, 1)])
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            _canal("orders", {"id": 2, "v": "b", "V": "B"}, 2),
            _canal("orders", {"id": 3, "v": "c"}, 3),
            _canal("items", {"id": 1, "name": "x", "NAME": "X"}, 4),
            _canal("items", {"id": 2, "name": "y"}, 5),
        ],
    )

    summary = lake.run("shop")

    assert lake.rows("orders") == [{"id": 1, "v": "a"}, {"id": 3, "v": "c"}]
    assert lake.rows("items") == [{"id": 2, "name": "y"}]
    assert (summary.tables["orders"].dead_lettered, summary.tables["items"].dead_lettered) == (1, 1)
    reasons = [(r["line"], r["target_table"], r["reason"]) for r in lake.dead_letters()]
    assert reasons == [
        (
            1,
            "orders",
            "column 'V' differs from column 'v' only in case (column names are compared "
            "without case): the change is not applied",
        ),
        (
            3,
            "items",
            "column 'NAME' differs from column 'name' only in case (column names are compared "
            "without case): the change is not applied",
        ),
    ]


def test_table_names_differing_in_case_share_one_mirror_and_unicode_letters_are_kept(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            _canal("Users", {"id": 1, "v": "a"}, 1),
            _canal("users", {"id": 2, "v": "b"}, 2),
            _canal("ünïcödé表", {"id": 3, "v": "c"}, 3),
        ],
    )

    summary = lake.run("shop")

    assert summary.merged_sources == {"users": ["shop.Users", "shop.users"]}
    assert (
        "users: changes of shop.Users, shop.users are applied to this one table" in summary.render()
    )
    assert lake.rows("users") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert lake.rows("ünïcödé表") == [{"id": 3, "v": "c"}]


def test_a_column_without_a_name_is_dead_lettered_and_the_rest_applies(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [_canal("orders", {"id": 1, "": "a"}, 1), _canal("orders", {"id": 2, "v": "b"}, 2)],
    )

    summary = lake.run("shop")

    assert lake.rows("orders") == [{"id": 2, "v": "b"}]
    assert summary.tables["orders"].dead_lettered == 1
    [letter] = lake.dead_letters()
    assert (letter["line"], letter["reason"]) == (
        1,
        "column name '' is empty or blank, which a table cannot hold: the change is not applied",
    )


def test_a_table_the_batch_cannot_apply_is_dead_lettered_whole_and_the_others_apply(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [_canal("orders", {"id": 1, "v": "a"}, 1), _canal("items", {"id": 1, "v": "x"}, 2)],
    )
    lake.run("shop")
    # A mirror damaged by hand: its ordering column is gone.
    lake.spark.sql(f"ALTER TABLE {lake.catalog}.ods.orders DROP COLUMN _cdc_order")
    lake.land(
        "shop",
        "002.json",
        [_canal("orders", {"id": 2, "v": "b"}, 3), _canal("items", {"id": 2, "v": "y"}, 4)],
    )

    summary = lake.run("shop")

    assert lake.rows("items") == [{"id": 1, "v": "x"}, {"id": 2, "v": "y"}]
    assert lake.rows("orders") == [{"id": 1, "v": "a"}]
    assert (summary.messages, summary.dead_lettered) == (1, 1)
    [letter] = lake.dead_letters()
    assert (letter["line"], letter["target_table"]) == (1, "orders")
    assert letter["reason"].startswith("table orders could not be applied: ")
    assert "_cdc_order" in letter["reason"]
    assert lake.run("shop").batch_id is None
