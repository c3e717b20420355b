"""Maxwell and Oracle GoldenGate JSON: SeaTunnel's filter-table data through ``maxwell-json`` and
``ogg-json``, and what each message shape means for the mirror.

SeaTunnel's expectations are changelogs (+I/-U/+U/-D, transcribed in
tests/fixtures/conformance/seatunnel/expected/); the mirror must be the table each changelog leaves
behind. Paimon's table and database cases for both formats are in
test_paimon_maxwell_ogg_conformance.py, its schema-evolution steps in
test_paimon_schema_evolution.py.
"""

from __future__ import annotations

import json

import pytest
from canal_expectations import (
    SEATUNNEL,
    assert_table,
    expected,
    final_table,
    json_lines,
    records,
)

INPUTS = SEATUNNEL.parent


@pytest.mark.parametrize(
    ("fmt", "name", "table"),
    [
        ("maxwell-json", "maxwell-data-filter-table", "product"),
        ("ogg-json", "ogg-data-filter-table", "tbl_test"),
    ],
)
def test_seatunnel_filter_table_data_leaves_the_table_of_its_changelog(lake, fmt, name, table):
    doc = expected(SEATUNNEL / f"{name}.expected.json")
    lines = json_lines(INPUTS / doc["input"])
    lake.add_pipeline("shop", fmt)
    lake.land("shop", f"{name}.json", lines)
    summary = lake.run("shop")
    assert (summary.lines, summary.dead_lettered) == (len(lines), 0)
    counts = summary.tables[table]
    assert counts.messages == records(doc["changelog"]) == len(lines)
    assert_table(lake, table, final_table(doc["changelog"], ("id",)), ("id",))


def test_seatunnel_filter_table_database_and_table_names(lake):
    """SeaTunnel filters ``^test.*``/``^prod.*`` (Maxwell) and ``^OG.*``/``^TBL.*`` (OGG) on the
    names each message carries; here they name each change's source (shown by dead letters)."""
    lake.add_pipeline("maxwell", "maxwell-json", namespace="m")
    lake.add_pipeline("ogg", "ogg-json", namespace="o")
    for fmt, name in (("maxwell", "maxwell"), ("ogg", "ogg")):
        doc = expected(SEATUNNEL / f"{name}-data-filter-table.expected.json")
        lake.land(fmt, "data.json", json_lines(INPUTS / doc["input"]))
    assert lake.run("maxwell").tables["product"].messages == 20
    assert lake.run("ogg").tables["tbl_test"].messages == 16
    lake.land("maxwell", "bad.json", [json.dumps({"database": "test", "type": "insert"})])
    lake.land(
        "ogg", "bad.json", [json.dumps({"table": "OGG.TBL_TEST", "op_type": "X", "after": {}})]
    )
    lake.run("maxwell")
    lake.run("ogg")
    letters = {
        (d["source_table"], d["reason"]) for d in lake.dead_letters("m") + lake.dead_letters("o")
    }
    assert letters == {
        ("test", "message names no table"),
        ("OGG.TBL_TEST", "unknown op_type 'X'"),
    }


# --- Maxwell --------------------------------------------------------------------------------------


def maxwell(kind: str, data: dict, **extra) -> dict:
    return {
        "database": "shop",
        "table": "orders",
        "type": kind,
        "ts": 1700000000,
        "data": data,
        "primary_key_columns": ["id"],
        **extra,
    }


def test_maxwell_orders_by_binlog_position_then_transaction_and_row(lake):
    """A later binlog position wins whatever the landing order; within a transaction the commit
    row (no xoffset) is the last."""
    lake.add_pipeline("shop", "maxwell-json")
    lake.land(
        "shop",
        "a.json",
        [
            # Landed first, but from a later binlog file: it is the newest.
            maxwell("update", {"id": 1, "v": "newest"}, position="master.000004:100", xid=9),
            maxwell("insert", {"id": 1, "v": "old"}, position="master.000003:900", xid=8),
            # One transaction: the commit row (no xoffset) after the row at xoffset 0.
            maxwell(
                "update", {"id": 2, "v": "last"}, position="master.000003:950", xid=8, commit=True
            ),
            maxwell(
                "insert", {"id": 2, "v": "first"}, position="master.000003:950", xid=8, xoffset=0
            ),
        ],
    )
    summary = lake.run("shop")
    assert summary.tables["orders"].superseded == 2
    assert {r["id"]: r["v"] for r in lake.rows("orders", "id", "v")} == {1: "newest", 2: "last"}


def test_maxwell_bootstrap_rows_ddl_and_control_messages(lake):
    lake.add_pipeline("shop", "maxwell-json")
    lake.land(
        "shop",
        "a.json",
        [
            {"database": "shop", "table": "orders", "type": "bootstrap-start", "ts": 1, "data": {}},
            maxwell("bootstrap-insert", {"id": 1, "v": "snap"}),
            {
                "database": "shop",
                "table": "orders",
                "type": "bootstrap-complete",
                "ts": 1,
                "data": {},
            },
            {
                "database": "shop",
                "type": "table-alter",
                "ts": 2,
                "xid": 5,
                "position": "master.000001:10",
                "sql": "ALTER TABLE orders ADD COLUMN note VARCHAR(20)",
                "def": {"table": "orders"},
            },
            maxwell(
                "insert", {"id": 2, "v": "binlog", "note": "hi"}, xid=6, position="master.000001:20"
            ),
            {"database": "shop", "type": "database-create", "ts": 3, "sql": "CREATE DATABASE x"},
        ],
    )
    summary = lake.run("shop")
    assert (summary.no_row_change, summary.ddl_recorded, summary.ddl_applied) == (4, 1, 1)
    assert summary.tables["orders"].inserted == 2
    rows = {r["id"]: (r["v"], r["note"]) for r in lake.rows("orders", "id", "v", "note")}
    assert rows == {1: ("snap", None), 2: ("binlog", "hi")}


# --- Oracle GoldenGate --------------------------------------------------------------------------


def ogg(op: str, pos: int, before=None, after=None, **extra) -> dict:
    message = {
        "table": "HR.EMP",
        "op_type": op,
        "op_ts": "2024-01-02 03:04:05.000000",
        "pos": f"{pos:020d}",
        **extra,
    }
    if before is not None:
        message["before"] = before
    if after is not None:
        message["after"] = after
    return message


def test_ogg_default_formatter_with_configured_keys_and_a_key_change(lake):
    """Without includePrimaryKeys the key comes from ``keys:``; an update whose before image holds
    another key moves the row; a truncate empties the table."""
    lake.add_pipeline("hr", "ogg-json", keys={"EMP": ["ID"]})
    lake.land(
        "hr",
        "a.json",
        [
            ogg("I", 1, after={"ID": 1, "NAME": "ann"}),
            ogg("I", 2, after={"ID": 2, "NAME": "bob"}),
            ogg("U", 3, before={"ID": 2, "NAME": "bob"}, after={"ID": 3, "NAME": "bob"}),
            ogg("D", 4, before={"ID": 1, "NAME": "ann"}),
        ],
    )
    summary = lake.run("hr")
    assert summary.dead_lettered == 0, summary.dead_letter_samples
    assert summary.tables["emp"].key_changes == 1
    assert {r["ID"]: r["NAME"] for r in lake.rows("emp", "ID", "NAME")} == {3: "bob"}
    lake.land("hr", "b.json", [ogg("T", 5), ogg("I", 6, after={"ID": 7, "NAME": "eve"})])
    truncated = lake.run("hr")
    assert truncated.ddl_applied == 1
    assert {r["ID"]: r["NAME"] for r in lake.rows("emp", "ID", "NAME")} == {7: "eve"}


def test_ogg_primary_keys_and_tokens_formatter_orders_by_trail_position(lake):
    lake.add_pipeline("hr", "ogg-json")
    tokens = {"csn": "123", "txid": "4.5.6"}
    lake.land(
        "hr",
        "a.json",
        [
            # Landed first, but later in the trail (a 23-digit position, past a bigint).
            ogg(
                "U",
                10**21 + 2,
                before={"ID": 1},
                after={"ID": 1, "SAL": 300},
                primary_keys=["ID"],
                tokens=tokens,
            ),
            ogg("I", 10**21 + 1, after={"ID": 1, "SAL": 100}, primary_keys=["ID"], tokens=tokens),
        ],
    )
    summary = lake.run("hr")
    assert summary.tables["emp"].superseded == 1
    assert [(r["ID"], r["SAL"]) for r in lake.rows("emp", "ID", "SAL")] == [(1, 300)]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("include_tables: 'a(b'", "include_tables: 'a\\(b' is not a regular expression"),
        ("exclude_tables: ''", "exclude_tables: must be a regular expression"),
        ("column_names: upper", "column_names: 'upper' must be one of as-sent, lowercase"),
    ],
)
def test_table_filters_and_column_names_are_validated(tmp_path, keys, message):
    from cdc_ingest.config import ConfigError, load_config

    path = tmp_path / "pipelines.yaml"
    path.write_text(
        "catalog: {name: lake, uri: 'sqlite:////tmp/x.db', warehouse: 'file:///tmp/w'}\n"
        "pipelines:\n  - {name: p, format: ogg-json, namespace: ods, landing: 'file:///l', "
        + keys
        + "}\n"
    )
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_lowercase_column_names_apply_to_configured_keys(tmp_path):
    from cdc_ingest.config import load_config

    path = tmp_path / "pipelines.yaml"
    path.write_text(
        "catalog: {name: lake, uri: 'sqlite:////tmp/x.db', warehouse: 'file:///tmp/w'}\n"
        "pipelines:\n  - {name: p, format: ogg-json, namespace: ods, landing: 'file:///l', "
        "column_names: lowercase, keys: {T1: [ID]}}\n"
    )
    [pipeline] = load_config(path).pipelines
    assert pipeline.keys == {"T1": ("id",)}


def test_lowercase_column_names_apply_to_the_columns_ddl_adds(lake):
    """A statement adding ``Note`` and rows spelling it ``NOTE``: one column ``note``, filled."""
    lake.add_pipeline("shop", "maxwell-json", column_names="lowercase")
    lake.land(
        "shop",
        "a.json",
        [
            maxwell("insert", {"ID": 1, "V": "a"}, primary_key_columns=["ID"], xid=1),
            {
                "database": "shop",
                "type": "table-alter",
                "ts": 2,
                "xid": 5,
                "position": "master.000001:10",
                "sql": "ALTER TABLE orders ADD COLUMN Note VARCHAR(20)",
                "def": {"table": "orders"},
            },
            maxwell(
                "insert",
                {"id": 2, "v": "b", "NOTE": "hi"},
                primary_key_columns=["Id"],
                xid=6,
                position="master.000001:20",
            ),
        ],
    )
    summary = lake.run("shop")
    assert (summary.dead_lettered, summary.ddl_applied) == (0, 1)
    columns = [f.name for f in lake.table("orders").schema if not f.name.startswith("_cdc")]
    assert columns == ["id", "v", "note"]
    rows = {r["id"]: (r["v"], r["note"]) for r in lake.rows("orders", "id", "v", "note")}
    assert rows == {1: ("a", None), 2: ("b", "hi")}


def test_lowercase_column_names_refuse_a_message_spelling_one_column_twice(lake):
    lake.add_pipeline("shop", "maxwell-json", column_names="lowercase")
    lake.land(
        "shop",
        "a.json",
        [
            maxwell("insert", {"id": 1, "v": "a"}, xid=1),
            maxwell("insert", {"id": 2, "V": "b", "v": "c"}, xid=2),
        ],
    )
    summary = lake.run("shop")
    assert (summary.lines, summary.dead_lettered) == (2, 1)
    [letter] = lake.dead_letters("ods")
    assert (letter["line"], letter["reason"]) == (
        2,
        "the message names a column in two spellings that differ only in case "
        "(column_names: lowercase)",
    )
    assert [(r["id"], r["v"]) for r in lake.rows("orders", "id", "v")] == [(1, "a")]
