"""Seed 003 (Arcion): key and value messages with envelope kafka, snapshot rows, tombstones."""

from __future__ import annotations

import json

from conftest import FIXTURES
from seed_samples import ARCION_SEED, seed_blocks

ARCION = FIXTURES / "arcion"
STEPS = ["snapshot-insert", "insert", "update", "delete", "tombstone"]
AFRICA_COMMENT = (
    "lar deposits. blithely final packages cajole. regular waters are final requests. "
    "regular accounts are according to "
)


def record(name: str) -> str:
    return (ARCION / f"{name}.jsonl").read_text().splitlines()[0]


def test_fixtures_carry_the_seed_key_and_value_messages_verbatim() -> None:
    landed = []
    for name in STEPS:
        rec = json.loads(record(name))
        landed += [rec["key"], rec["value"]]
    assert landed == seed_blocks(ARCION_SEED)


def test_each_sample_applied_in_turn(lake):
    lake.add_pipeline("region", "arcion", envelope="kafka")
    expected_after = {
        "snapshot-insert": [{"r_regionkey": 0, "r_name": "AFRICA", "r_comment": AFRICA_COMMENT}],
        "insert": [
            {"r_regionkey": 0, "r_name": "AFRICA", "r_comment": AFRICA_COMMENT},
            {"r_regionkey": 6, "r_name": "Test_Region", "r_comment": "Test_Comment"},
        ],
        "update": [
            {"r_regionkey": 0, "r_name": "AFRICA", "r_comment": "Test_Replication"},
            {"r_regionkey": 6, "r_name": "Test_Region", "r_comment": "Test_Comment"},
        ],
        "delete": [{"r_regionkey": 6, "r_name": "Test_Region", "r_comment": "Test_Comment"}],
        "tombstone": [{"r_regionkey": 6, "r_name": "Test_Region", "r_comment": "Test_Comment"}],
    }
    for step, name in enumerate(STEPS, start=1):
        lake.land("region", f"{step:03d}-{name}.jsonl", [record(name)])
        summary = lake.run("region")
        assert (summary.lines, summary.messages, summary.dead_lettered) == (1, 1, 0), name
        assert lake.rows("region", "r_regionkey", "r_name", "r_comment") == expected_after[name], (
            name
        )
    assert summary.no_row_change == 1  # the tombstone
    types = {f.name: f.dataType.simpleString() for f in lake.table("region").schema.fields}
    # "r_regionkey": "0" arrives as a string; the Connect schema says int32.
    assert (types["r_regionkey"], types["r_name"], types["r_comment"]) == (
        "int",
        "string",
        "string",
    )


def test_all_samples_in_one_batch(lake):
    lake.add_pipeline("region", "arcion", envelope="kafka")
    lake.land("region", "all.jsonl", [record(n) for n in STEPS])
    summary = lake.run("region")
    assert (summary.lines, summary.messages, summary.no_row_change) == (5, 5, 1)
    table = summary.tables["region"]
    # key 0: snapshot insert, update, delete collapse to the delete of an absent key.
    assert (table.inserted, table.deleted_absent, table.superseded) == (1, 1, 2)
    assert lake.rows("region", "r_regionkey") == [{"r_regionkey": 6}]


def test_late_snapshot_row_does_not_resurrect_a_deleted_key(lake):
    lake.add_pipeline("region", "arcion", envelope="kafka")
    lake.land("region", "001.jsonl", [record("insert"), record("update"), record("delete")])
    lake.run("region")
    # The snapshot row of key 0 lands late: snapshot rows order before streaming rows.
    lake.land("region", "002.jsonl", [record("snapshot-insert")])
    summary = lake.run("region")
    assert summary.tables["region"].older == 1
    assert lake.rows("region", "r_regionkey") == [{"r_regionkey": 6}]


def test_tombstone_as_a_bare_line_without_kafka_envelope_changes_nothing(lake):
    lake.add_pipeline("bare", "arcion", keys={"region": ["r_regionkey"]})
    value = json.loads(record("insert"))["value"]
    lake.land("bare", "001.jsonl", [value, '"default"'])
    summary = lake.run("bare")
    assert (summary.messages, summary.no_row_change, summary.dead_lettered) == (2, 1, 0)
    assert lake.rows("region", "r_regionkey") == [{"r_regionkey": 6}]
