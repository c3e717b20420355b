"""Flink and SeaTunnel Debezium JSON test data (tests/fixtures/conformance), through the job."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal

import pytest
from conftest import CONFORMANCE, FIXTURES

DEBEZIUM = FIXTURES / "debezium-json"
FLINK_EXPECTED = CONFORMANCE / "flink" / "expected"
CASES = [
    "debezium-data-schema-exclude",
    "debezium-data-schema-include",
    "debezium-postgres-data-schema-exclude",
    "debezium-postgres-data-schema-include",
]


def final_table(changelog: list[dict]) -> list[dict]:
    """The table a changelog leaves behind: +I/+U rows kept, -U/-D rows removed, by id."""
    rows: dict[int, dict] = {}
    for change in changelog:
        row = change["row"]
        if change["op"] in ("+I", "+U"):
            rows[row["id"]] = row
        else:
            rows.pop(row["id"], None)
    return [rows[k] for k in sorted(rows)]


@pytest.mark.parametrize("case", CASES)
def test_flink_debezium_changelog_final_state(lake, case):
    expected_doc = FLINK_EXPECTED / f"{case}.expected.json"
    expected = final_table(json.loads(expected_doc.read_text())["changelog"])
    lake.add_pipeline("products", "debezium-json", keys={"products": ["id"]})
    lines = (DEBEZIUM / f"{case}.txt").read_text().splitlines()
    lake.land("products", "products.txt", lines)
    summary = lake.run("products")
    assert (summary.lines, summary.messages, summary.dead_lettered) == (16, 16, 0)
    got = lake.rows("products", "id", "name", "description", "weight")
    assert [r["id"] for r in got] == [r["id"] for r in expected]
    for mine, theirs in zip(got, expected, strict=True):
        assert {k: mine[k] for k in ("name", "description")} == {
            k: theirs[k] for k in ("name", "description")
        }
        assert mine["weight"] == pytest.approx(theirs["weight"], rel=1e-6)


def test_flink_debezium_one_message_per_batch_gives_the_same_table(lake):
    expected_doc = FLINK_EXPECTED / "debezium-data-schema-exclude.expected.json"
    expected = final_table(json.loads(expected_doc.read_text())["changelog"])
    lake.add_pipeline("products", "debezium-json", keys={"products": ["id"]})
    lines = (DEBEZIUM / "debezium-data-schema-exclude.txt").read_text().splitlines()
    for start in range(0, len(lines), 4):
        lake.land("products", f"part-{start:03d}.txt", lines[start : start + 4])
        lake.run("products")
    assert [r["id"] for r in lake.rows("products", "id")] == [r["id"] for r in expected]


def test_postgres_default_replica_identity_deletes_are_dead_lettered_with_the_reason(lake):
    lake.add_pipeline("products", "debezium-json", keys={"products": ["id"]})
    lines = (DEBEZIUM / "debezium-postgres-data-replica-identity.txt").read_text().splitlines()
    lake.land("products", "products.txt", lines)
    summary = lake.run("products")
    # Line 16 is the file's one delete (of id 111), sent without a before image.
    assert summary.dead_lettered == 1 and summary.lines == 16
    letters = lake.dead_letters()
    assert [letter["line"] for letter in letters] == [16]
    assert all("REPLICA IDENTITY" in letter["reason"] for letter in letters)
    # Updates carry the full after image, so they apply even without `before`.
    row_106 = [r for r in lake.rows("products", "id", "description") if r["id"] == 106]
    assert row_106 == [{"id": 106, "description": "18oz carpenter hammer"}]


def test_seatunnel_all_types_are_typed_by_the_connect_schema(lake):
    lake.add_pipeline("types", "debezium-json", keys={"mysql_cdc_e2e_source_table": ["id"]})
    lake.land("types", "types.txt", (DEBEZIUM / "seatunnel-all-types.txt").read_text().splitlines())
    summary = lake.run("types")
    assert (summary.messages, summary.dead_lettered) == (3, 0)
    table = lake.table("mysql_cdc_e2e_source_table")
    types = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    # DATETIME (io.debezium.time.Timestamp) has no zone; TIMESTAMP (ZonedTimestamp) is an instant.
    assert types["f_date"] == "date" and types["f_datetime"] == "timestamp_ntz"
    assert types["f_timestamp"] == "timestamp" and types["f_bigint_unsigned"] == "decimal(38,0)"
    assert (
        types["f_smallint"] == "int"
        and types["f_bigint"] == "bigint"
        and types["f_blob"] == "binary"
    )
    row = table.where("id = 1").collect()[0].asDict()
    assert row["f_date"] == dt.date(2022, 4, 27)  # 19109 days after 1970-01-01
    assert row["f_datetime"] == dt.datetime(2022, 4, 27, 14, 30)  # 1651069800000 ms
    assert row["f_timestamp"] == dt.datetime(2023, 4, 27, 3, 8, 40)
    assert row["f_bigint_unsigned"] == Decimal(987654321)
    assert bytes(row["f_blob"]) == base64.b64decode("aGVsbG8=") == b"hello"
    assert row["f_bit1"] is True and row["f_tinyint"] == -128 and row["f_tinyint_unsigned"] == 255
    assert row["f_float"] == pytest.approx(12.34, rel=1e-6)
    assert (
        row["f_json"] == '{"key": "value"}' and row["f_enum"] == "enum2" and row["f_year"] == 2022
    )


def test_zoneless_debezium_timestamps_are_local_date_times_and_zoned_ones_instants(lake):
    fields = [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "field": "ms"},
        {
            "type": "int64",
            "optional": True,
            "name": "io.debezium.time.MicroTimestamp",
            "field": "us",
        },
        {
            "type": "int64",
            "optional": True,
            "name": "io.debezium.time.NanoTimestamp",
            "field": "ns",
        },
        {
            "type": "string",
            "optional": True,
            "name": "io.debezium.time.ZonedTimestamp",
            "field": "zoned",
        },
        {
            "type": "int64",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Timestamp",
            "field": "connect",
        },
    ]
    schema = {
        "type": "struct",
        "fields": [
            {"type": "struct", "optional": True, "field": side, "fields": fields}
            for side in ("before", "after")
        ],
    }
    after = {
        "id": 1,
        "ms": 1651069800000,  # 2022-04-27 14:30:00 on the source's wall clock
        "us": 1651069800123456,
        "ns": 1651069800123456789,
        "zoned": "2022-04-27T14:30:00+08:00",
        "connect": 1651069800000,
    }
    payload = {
        "op": "c",
        "ts_ms": 1,
        "before": None,
        "after": after,
        "source": {"connector": "mysql", "db": "shop", "table": "times", "ts_ms": 1},
    }
    lake.add_pipeline("times", "debezium-json", keys={"times": ["id"]})
    lake.land("times", "001.json", [{"schema": schema, "payload": payload}])
    lake.run("times")
    table = lake.table("times")
    types = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    assert [types[c] for c in ("ms", "us", "ns", "zoned", "connect")] == [
        "timestamp_ntz",
        "timestamp_ntz",
        "timestamp_ntz",
        "timestamp",
        "timestamp",
    ]
    row = table.selectExpr(
        "ms", "us", "ns", "cast(zoned as string) zoned", "cast(connect as string) connect"
    ).collect()[0]
    assert row["ms"] == dt.datetime(2022, 4, 27, 14, 30)
    assert row["us"] == dt.datetime(2022, 4, 27, 14, 30, 0, 123456)
    assert row["ns"] == dt.datetime(2022, 4, 27, 14, 30, 0, 123456)
    # Instants, shown in the session's zone (UTC).
    assert (row["zoned"], row["connect"]) == ("2022-04-27 06:30:00", "2022-04-27 14:30:00")
