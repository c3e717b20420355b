"""Seed 000 (Lindorm): every sample message, verbatim, applied one batch at a time."""

from __future__ import annotations

import json

from conftest import FIXTURES
from seed_samples import LINDORM_SEED, seed_blocks

LINDORM = FIXTURES / "lindorm"


def fixture_lines(name: str) -> list[str]:
    return (LINDORM / name).read_text().splitlines()


def test_fixtures_are_the_seed_samples_verbatim() -> None:
    names = [
        "structure-example",
        "sql-insert",
        "sql-update",
        "sql-delete",
        "sql-column-delete",
        "hbase-insert",
    ]
    landed = [json.loads(fixture_lines(f"{n}.jsonl")[0]) for n in names]
    assert landed == seed_blocks(LINDORM_SEED)


def test_sql_table_insert_update_delete_and_column_delete(lake):
    lake.add_pipeline("customers", "lindorm", keys={"customers": ["id"]})
    expected_after = [
        ("sql-insert", [{"id": "1004", "first_name": "Anne", "last_name": "Kretchmar"}]),
        ("sql-update", [{"id": "1004", "first_name": "Anne", "last_name": "Kretchmar"}]),
        ("sql-delete", []),
        # Column delete: `after` omits last_name, so last_name is NULL afterwards.
        ("sql-column-delete", [{"id": "1004", "first_name": "Anne Marie", "last_name": None}]),
    ]
    for step, (name, rows) in enumerate(expected_after, start=1):
        lake.land("customers", f"{step:03d}-{name}.jsonl", fixture_lines(f"{name}.jsonl"))
        summary = lake.run("customers")
        assert summary.lines == 1 and summary.messages == 1 and summary.dead_lettered == 0
        assert lake.rows("customers") == rows, name
    assert summary.tables["customers"].inserted == 1  # the column delete re-creates the deleted key


def test_sql_samples_in_one_batch_collapse_to_the_last_change(lake):
    lake.add_pipeline("customers", "lindorm", keys={"customers": ["id"]})
    lines = [
        fixture_lines(f"{n}.jsonl")[0]
        for n in ("sql-insert", "sql-update", "sql-delete", "sql-column-delete")
    ]
    lake.land("customers", "batch.jsonl", lines)
    summary = lake.run("customers")
    table = summary.tables["customers"]
    assert (table.inserted, table.superseded, table.messages) == (1, 3, 4)
    assert lake.rows("customers") == [{"id": "1004", "first_name": "Anne Marie", "last_name": None}]


def test_hbase_table_is_keyed_by_row_with_base64_cells_as_bytes(lake):
    lake.add_pipeline("hbase", "lindorm")
    lake.land("hbase", "hbase.jsonl", fixture_lines("hbase-insert.jsonl"))
    summary = lake.run("hbase")
    assert summary.tables["customers"].inserted == 1
    rows = lake.rows("customers")
    assert rows == [{"ROW": bytearray(b"user1"), "f_name": bytearray(b"lucky")}]


def test_structure_example_is_typed_by_its_connect_schema(lake):
    lake.add_pipeline("typed", "lindorm", keys={"customers": ["id"]})
    lake.land("typed", "example.jsonl", fixture_lines("structure-example.jsonl"))
    lake.run("typed")
    schema = {f.name: f.dataType.simpleString() for f in lake.table("customers").schema.fields}
    assert schema["id"] == "int" and schema["name"] == "string"
    assert lake.rows("customers") == [{"id": 1004, "name": "Anne"}]


def test_without_configured_keys_sql_rows_are_dead_lettered_with_the_reason(lake):
    lake.add_pipeline("nokeys", "lindorm")
    lake.land("nokeys", "insert.jsonl", fixture_lines("sql-insert.jsonl"))
    summary = lake.run("nokeys")
    assert (summary.messages, summary.dead_lettered) == (0, 1)
    [letter] = lake.dead_letters()
    assert letter["line"] == 1 and letter["file"].endswith("insert.jsonl")
    assert "no key columns known for source table ld-xxxx.default.customers" in letter["reason"]
