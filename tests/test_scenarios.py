"""One suite of semantic scenarios, run for every registered format."""

from __future__ import annotations

from typing import Any

import pytest
from formats_under_test import FORMATS, TABLE, Changes
from lakehouses import JDBC_FILE, REST_S3

ALICE = {"id": 1, "owner": "alice", "balance": 100}
BOB = {"id": 2, "owner": "bob", "balance": 50}


# The write routes besides the default (a batch's new tables appended by pyiceberg in a group,
# small tables rewritten whole by it), as ``WritePolicy`` sizes: tables that hold rows merged by
# Spark in a group; every table applied alone by a plan of its own; no pyiceberg write at all
# (what lineage asks for).
ROUTES: dict[str, dict[str, Any]] = {
    "merged in a group": {"rewritten_rows": 0},
    "alone": {"group_rows": 0},
    "spark writes": {"pyiceberg": False},
}
# Every format on the embedded default; the scenarios once more on a REST catalog over S3, and
# over every other write route.
CASES: list[tuple[str, str, str | None]] = [(fmt, JDBC_FILE, None) for fmt in sorted(FORMATS)]
CASES.append(("debezium-json", REST_S3, None))
CASES += [("debezium-json", JDBC_FILE, route) for route in ROUTES]


def _case_id(fmt: str, kind: str, route: str | None) -> str:
    return "-".join([fmt, *([kind] if kind != JDBC_FILE else []), *([route] if route else [])])


def pytest_generate_tests(metafunc):
    if "fmt" in metafunc.fixturenames:
        metafunc.parametrize(
            ("fmt", "lake", "route"),
            CASES,
            indirect=["lake"],
            ids=[_case_id(*case) for case in CASES],
        )


@pytest.fixture
def route() -> str | None:
    """The case's write route (``ROUTES``; None: the default), parametrized with the format."""
    return None


@pytest.fixture(autouse=True)
def _write_route(request, route):
    """Each scenario's lake takes its case's write route."""
    if route is not None:
        request.getfixturevalue("lake").route_at(**ROUTES[route])


def test_every_registered_format_has_a_row_in_the_scenario_suite() -> None:
    from cdc_ingest.formats import format_names

    # A new format added to the registry without a builder here would miss every scenario.
    assert sorted(FORMATS) == sorted(format_names())


@pytest.fixture
def pipe(lake, fmt):
    lake.add_pipeline("accounts", fmt, **FORMATS[fmt]["options"])
    return lake


def rows(lake):
    return lake.rows(TABLE, "id", "owner", "balance")


def test_insert_update_delete_across_batches_are_row_level_changes(pipe, fmt):

    # As a table larger than a rewrite: merged (a small one is rewritten whole by pyiceberg,
    # tests/test_one_small_table.py).
    pipe.route_at(rewritten_rows=1)
    c = Changes(fmt)
    pipe.land("accounts", "001.json", [c.insert(ALICE, 1000), c.insert(BOB, 1001)])
    s1 = pipe.run("accounts")
    assert s1.tables[TABLE].inserted == 2 and rows(pipe) == [ALICE, BOB]
    pipe.land(
        "accounts",
        "002.json",
        [c.update(ALICE, {**ALICE, "balance": 90}, 2000), c.delete(BOB, 2001)],
    )
    s2 = pipe.run("accounts")
    assert (s2.tables[TABLE].updated, s2.tables[TABLE].deleted) == (1, 1)
    assert rows(pipe) == [{**ALICE, "balance": 90}]
    # Row-level: the update batch wrote delete files (merge-on-read) instead of rewriting data.
    summary = pipe.spark.sql(
        f"SELECT summary FROM {pipe.catalog}.ods.{TABLE}.snapshots "
        "ORDER BY committed_at DESC LIMIT 1"
    ).collect()[0]["summary"]
    assert int(summary.get("added-position-deletes", "0")) == 2
    assert summary.get("deleted-data-files") is None


def test_changes_to_one_key_in_a_batch_collapse_in_source_order(pipe, fmt):
    c = Changes(fmt)
    lines = [
        c.insert(ALICE, 1000),
        c.update(ALICE, {**ALICE, "balance": 1}, 1001),
        c.update(ALICE, {**ALICE, "balance": 2}, 1002),
        c.insert(BOB, 1003),
        c.delete(BOB, 1004),
    ]
    pipe.land("accounts", "001.json", lines)
    table = pipe.run("accounts").tables[TABLE]
    assert (table.inserted, table.deleted_absent, table.superseded) == (1, 1, 3)
    assert rows(pipe) == [{**ALICE, "balance": 2}]


def test_an_older_change_never_overwrites_newer_state(pipe, fmt):
    c = Changes(fmt)
    insert = c.insert(ALICE, 1000)
    newer = c.update(ALICE, {**ALICE, "balance": 300}, 3000)
    older = c.update(ALICE, {**ALICE, "balance": 200}, 2000)
    pipe.land("accounts", "001.json", [insert, newer])
    pipe.run("accounts")
    pipe.land("accounts", "002.json", [older])  # a late event, landed after the newer one
    assert pipe.run("accounts").tables[TABLE].older == 1
    assert rows(pipe) == [{**ALICE, "balance": 300}]
    pipe.land("accounts", "003.json", [older, newer])  # within one batch too
    pipe.run("accounts")
    assert rows(pipe) == [{**ALICE, "balance": 300}]


def test_a_late_insert_does_not_resurrect_a_deleted_row(pipe, fmt):
    c = Changes(fmt)
    first_lines = [c.insert(BOB, 900), c.delete(BOB, 2000)]
    late_insert = c.insert(BOB, 1000)
    pipe.land("accounts", "001.json", first_lines)
    pipe.run("accounts")
    assert rows(pipe) == []
    pipe.land("accounts", "002.json", [late_insert])
    assert pipe.run("accounts").tables[TABLE].older == 1
    assert rows(pipe) == []
    # A delete that arrives before its (older) insert is remembered too.
    pipe.land("accounts", "003.json", [c.delete(ALICE, 5000)])
    pipe.run("accounts")
    pipe.land("accounts", "004.json", [c.insert(ALICE, 4000)])
    pipe.run("accounts")
    assert rows(pipe) == []
    # A newer insert after the delete does bring the key back.
    pipe.land("accounts", "005.json", [c.insert({**ALICE, "balance": 7}, 6000)])
    assert pipe.run("accounts").tables[TABLE].inserted == 1
    assert rows(pipe) == [{**ALICE, "balance": 7}]


def test_same_file_under_another_name_and_reruns_have_no_second_effect(pipe, fmt):
    c = Changes(fmt)
    lines = [c.insert(ALICE, 1000), c.update(ALICE, {**ALICE, "balance": 5}, 1001)]
    pipe.land("accounts", "001.json", lines)
    pipe.run("accounts")
    snapshots = pipe.snapshots(TABLE)
    assert pipe.run("accounts").batch_id is None  # nothing new: nothing changes
    pipe.land("accounts", "001-copy.json", lines)
    again = pipe.run("accounts")
    assert again.duplicate_files and not again.tables
    assert pipe.snapshots(TABLE) == snapshots
    assert rows(pipe) == [{**ALICE, "balance": 5}]


def test_bad_lines_are_dead_lettered_and_counted_and_the_batch_goes_on(pipe, fmt):
    c = Changes(fmt)
    lines = [c.insert(ALICE, 1000), "{not json", '{"unexpected": "shape"}', c.insert(BOB, 1001)]
    pipe.land("accounts", "001.json", lines)
    s = pipe.run("accounts")
    assert (s.lines, s.messages, s.dead_lettered) == (4, 2, 2)
    assert rows(pipe) == [ALICE, BOB]
    letters = pipe.dead_letters()
    assert [(x["line"], x["raw"]) for x in letters] == [
        (2, "{not json"),
        (3, '{"unexpected": "shape"}'),
    ]
    assert letters[0]["reason"] == "line is not valid JSON"
    assert all(x["file"].endswith("001.json") and x["batch_id"] == s.batch_id for x in letters)
    assert any("001.json:2: line is not valid JSON" in sample for sample in s.dead_letter_samples)


def test_a_value_that_does_not_fit_its_column_is_dead_lettered(pipe, fmt):
    c = Changes(fmt)
    pipe.land("accounts", "001.json", [c.insert(ALICE, 1000)])
    pipe.run("accounts")
    pipe.land("accounts", "002.json", [c.update(ALICE, {**ALICE, "balance": "lots"}, 2000)])
    s = pipe.run("accounts")
    # A DataHub Tuple update is two records; its before image changes no row.
    assert (s.messages - s.no_row_change, s.dead_lettered) == (0, 1)
    [letter] = pipe.dead_letters()
    assert letter["reason"] == "column 'balance': value 'lots' is not a valid bigint"
    assert rows(pipe) == [ALICE]


# Formats whose update does not carry the old key (DataHub Tuple's two records name no key; an
# Aerospike write names its record by digest only): the old key stays (docs/formats.md). DataHub
# Blob's two halves of an update are paired inside a batch.
OLD_KEY_NOT_IN_THE_UPDATE = {"aerospike", "datahub-tuple"}


def test_an_update_that_changes_the_key_moves_the_row(pipe, fmt):
    c = Changes(fmt)
    pipe.land("accounts", "001.json", [c.insert(ALICE, 1000), c.insert(BOB, 1001)])
    pipe.run("accounts")
    moved = {**ALICE, "id": 3, "balance": 99}
    pipe.land("accounts", "002.json", [c.update(ALICE, moved, 2000)])

    summary = pipe.run("accounts").tables[TABLE]

    if fmt in OLD_KEY_NOT_IN_THE_UPDATE:
        assert rows(pipe) == [ALICE, BOB, moved]
        return
    assert rows(pipe) == [BOB, moved]
    assert (summary.messages, summary.key_changes) == (1, 1)
    assert (summary.inserted, summary.deleted) == (1, 1)
    # A late change to the old key, older than the move, does not bring it back.
    pipe.land("accounts", "003.json", [c.update(ALICE, {**ALICE, "balance": 5}, 1500)])
    assert pipe.run("accounts").tables[TABLE].older == 1
    assert rows(pipe) == [BOB, moved]
    # Moved twice in one batch, then a newer insert of the first key: the row is at its last
    # key, and the first key holds the new row.
    twice = {**BOB, "id": 5}
    lines = [
        c.update(BOB, {**BOB, "id": 4}, 3000),
        c.update({**BOB, "id": 4}, twice, 3001),
        c.insert({**BOB, "owner": "new bob"}, 3002),
    ]
    pipe.land("accounts", "004.json", lines)
    pipe.run("accounts")
    assert rows(pipe) == [{**BOB, "owner": "new bob"}, moved, twice]


def test_history_keeps_every_version_in_source_order(lake, fmt):
    """``history: scd2``: a late update lands in the version it belongs to, a delete ends the
    key, and each version ends where the next begins."""
    lake.add_pipeline(
        "accounts",
        fmt,
        **FORMATS[fmt]["options"],
        table_options={"*": {"history": "scd2"}},
    )
    c = Changes(fmt)
    first = [
        c.insert(ALICE, 1000),
        c.insert(BOB, 1001),
        c.update(ALICE, {**ALICE, "balance": 90}, 2000),
    ]
    lake.land("accounts", "001.json", first)
    lake.run("accounts")
    late = [c.update(ALICE, {**ALICE, "balance": 95}, 1500), c.delete(BOB, 2001)]
    lake.land("accounts", "002.json", late)
    lake.run("accounts")

    assert rows(lake) == [{**ALICE, "balance": 90}]
    stored = lake.table(f"{TABLE}_history").collect()
    # By key, then order; an Aerospike delete names its record by digest only (no id): last.
    history = sorted(stored, key=lambda r: (r["id"] is None, r["id"] or 0, r["_cdc_order"]))
    versions = [
        (
            r["id"],
            r["balance"] if r["_cdc_op"] != "delete" else None,
            r["_cdc_op"],
            r["_cdc_current"],
        )
        for r in history
    ]
    assert versions == [
        (1, 100, "insert", False),
        (1, 95, "update", False),
        (1, 90, "update", True),
        (2, 50, "insert", False),
        (None if fmt == "aerospike" else 2, None, "delete", False),
    ]
    ends = [(r["_cdc_valid_from"], r["_cdc_valid_to"]) for r in history]
    assert ends[0][1] == ends[1][0] and ends[1][1] == ends[2][0] and ends[2][1] is None
    assert ends[3][1] == ends[4][0] == ends[4][1]


def test_a_column_the_table_lacks_follows_the_add_column_policy(lake, fmt):
    """``schema_changes: {add_column: ...}``: ``dead-letter`` holds the table's changes with the
    reason, ``ignore`` applies them without the column's values and counts them."""
    options = FORMATS[fmt]["options"]
    lake.add_pipeline("accounts", fmt, **options, schema_changes={"add_column": "dead-letter"})
    c = Changes(fmt)
    lake.land("accounts", "001.json", [c.insert(ALICE, 1000)])
    lake.run("accounts")
    lake.land("accounts", "002.json", [c.update(ALICE, {**ALICE, "email": "a@example.com"}, 2000)])
    held = lake.run("accounts")
    assert held.tables[TABLE].dead_lettered >= 1 and rows(lake) == [ALICE]
    assert {x["reason"] for x in lake.dead_letters()} == {
        f"table {TABLE} waits: schema_changes is dead-letter for add_column: messages carry "
        "['email']"
    }
    lake.add_pipeline("accounts", fmt, **options, schema_changes={"add_column": "ignore"})
    later = {**ALICE, "balance": 80, "email": "b@example.com"}
    lake.land("accounts", "003.json", [c.update(ALICE, later, 3000)])
    ignored = lake.run("accounts")
    assert rows(lake) == [{**ALICE, "balance": 80}] and "email" not in lake.table(TABLE).columns
    assert ignored.ignored_values >= 1


def test_expectations_drop_or_warn_on_every_format(lake, fmt):
    rules = {
        "non_negative": {"check": "balance >= 0", "on_violation": "drop"},
        "small": {"check": "balance < 1000", "on_violation": "warn"},
    }
    options = FORMATS[fmt]["options"]
    lake.add_pipeline("accounts", fmt, **options, table_options={TABLE: {"expectations": rules}})
    c = Changes(fmt)
    negative = {**BOB, "balance": -5}
    rich = {**ALICE, "balance": 5000}
    lake.land("accounts", "001.json", [c.insert(ALICE, 1000), c.insert(negative, 1001)])
    lake.land("accounts", "002.json", [c.update(ALICE, rich, 2000)])
    s = lake.run("accounts")
    assert rows(lake) == [rich]
    assert s.tables[TABLE].dead_lettered == 1
    assert [x["reason"] for x in lake.dead_letters()] == [
        "expectation non_negative (balance >= 0) failed"
    ]
    assert s.tables[TABLE].expectations["small"] == {"on_violation": "warn", "violations": 1}


def test_a_route_sends_the_source_table_to_its_target_with_the_shard_in_columns(lake, fmt):
    # An Aerospike delete names no set, so no shard: it finds its row only by the source's key.
    shards_in_key = fmt != "aerospike"
    route = {"source": rf"(.+\.)?{TABLE}", "table": "ledger", "key_with_source": shards_in_key}
    lake.add_pipeline("accounts", fmt, **FORMATS[fmt]["options"], routes=[route])
    c = Changes(fmt)
    lake.land("accounts", "001.json", [c.insert(ALICE, 1000), c.insert(BOB, 1001)])
    lake.land("accounts", "002.json", [c.update(ALICE, {**ALICE, "balance": 7}, 2000)])
    lake.land("accounts", "003.json", [c.delete(BOB, 3000)])
    s = lake.run("accounts")
    assert TABLE not in s.tables and s.dead_lettered == 0
    assert lake.rows("ledger", "id", "owner", "balance") == [{**ALICE, "balance": 7}]
    [shard] = lake.rows("ledger", "_cdc_source_table")
    assert shard == {"_cdc_source_table": TABLE}
