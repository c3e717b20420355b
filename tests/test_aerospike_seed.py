"""Seed 004 (Aerospike flat JSON): the key, write and delete samples, verbatim, and the rules."""

from __future__ import annotations

import json

from conftest import FIXTURES
from seed_samples import AEROSPIKE_SEED, decoded_objects

AEROSPIKE = FIXTURES / "aerospike"
DIGEST = "IBlTW5m3UGqbFxfrsoDxCrLkKYQ="
LUT = 1617167159548


def fixture(name: str) -> dict:
    return json.loads((AEROSPIKE / name).read_text())


WRITE, DELETE, KEY = fixture("write.jsonl"), fixture("delete.jsonl"), fixture("key.json")


def write(digest: str, gen: int, lut: int, set_name: str | None = "premium", **bins) -> dict:
    meta = {"msg": "write", "namespace": "users", "gen": gen, "lut": lut, "digest": digest}
    if set_name is not None:
        meta["set"] = set_name
    return {"metadata": meta, **bins}


def delete(digest: str, gen: int, lut: int) -> dict:
    meta = {"msg": "delete", "namespace": "users", "digest": digest, "gen": gen, "lut": lut}
    return {"metadata": {**meta, "durable": False}}


def test_fixtures_are_the_seed_samples_verbatim() -> None:
    assert decoded_objects(AEROSPIKE_SEED) == [KEY, WRITE, DELETE]


def test_write_then_delete_without_set_removes_the_record(lake):
    lake.add_pipeline("users", "aerospike")
    lake.land("users", "001.jsonl", [WRITE])
    first = lake.run("users")
    assert first.tables["premium"].inserted == 1
    table = lake.table("premium")
    types = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    assert {c: types[c] for c in ("digest", "userKey", "color", "size")} == {
        "digest": "string",
        "userKey": "string",
        "color": "string",
        "size": "bigint",
    }
    assert {c: types[c] for c in ("_cdc_gen", "_cdc_lut", "_cdc_exp")} == dict.fromkeys(
        ("_cdc_gen", "_cdc_lut", "_cdc_exp"), "bigint"
    )
    assert "metadata" not in types
    assert lake.rows("premium") == [
        {"digest": DIGEST, "userKey": "7612", "color": "red", "size": 123}
    ]
    assert lake.rows("premium", "_cdc_gen", "_cdc_lut", "_cdc_exp") == [
        {"_cdc_gen": 4, "_cdc_lut": LUT, "_cdc_exp": 1682797792}
    ]
    # The delete names no set: its digest finds the record in the table keyed by digest.
    lake.land("users", "002.jsonl", [DELETE])
    second = lake.run("users")
    assert (second.deletes_without_table, second.deletes_without_table_tables) == (1, ["premium"])
    assert second.tables["premium"].deleted == 1
    assert lake.rows("premium") == []
    assert "1 deletes name no table" in second.render()


def test_write_and_delete_in_one_batch_leave_nothing(lake):
    lake.add_pipeline("users", "aerospike")
    lake.land("users", "001.jsonl", [WRITE, DELETE])
    summary = lake.run("users")
    # Same lut and generation: the landing position decides, and the delete came later.
    assert summary.tables["premium"].deleted_absent == 1
    assert lake.rows("premium") == []


def test_a_set_less_delete_is_remembered_against_an_older_write(lake):
    lake.add_pipeline("users", "aerospike")
    lake.land("users", "001.jsonl", [write("AAAA", 1, LUT, color="blue")])
    lake.run("users")
    lake.land("users", "002.jsonl", [delete(DIGEST, 5, LUT + 1)])
    lake.run("users")
    lake.land("users", "003.jsonl", [WRITE])  # the write the delete removed, landed late
    assert lake.run("users").tables["premium"].older == 1
    assert lake.rows("premium", "digest", "color") == [{"digest": "AAAA", "color": "blue"}]


def test_an_older_generation_never_overwrites_a_newer_one(lake):
    lake.add_pipeline("users", "aerospike")
    newer = write(DIGEST, 5, LUT + 10, color="green", size=1)
    lake.land("users", "001.jsonl", [newer, WRITE])  # WRITE is gen 4, older lut
    assert lake.run("users").tables["premium"].superseded == 1
    assert lake.rows("premium", "color") == [{"color": "green"}]
    # Without lut (connectors before 4.0 ship 0), the generation decides.
    lake.land(
        "users",
        "002.jsonl",
        [write("BBBB", 7, 0, color="new"), write("BBBB", 6, 0, color="old")],
    )
    lake.run("users")
    assert lake.rows("premium", "digest", "color") == [
        {"digest": "BBBB", "color": "new"},
        {"digest": DIGEST, "color": "green"},
    ]


def test_bins_are_typed_from_json_values(lake):
    lake.add_pipeline("users", "aerospike")
    record = write(
        "CCCC", 1, LUT, count=3, ratio=0.5, vip=True, tags=["a", "b"], profile={"age": 40}
    )
    lake.land("users", "001.jsonl", [record])
    lake.run("users")
    types = {f.name: f.dataType.simpleString() for f in lake.table("premium").schema.fields}
    assert {c: types[c] for c in ("count", "ratio", "vip", "tags", "profile")} == {
        "count": "bigint",
        "ratio": "double",
        "vip": "boolean",
        "tags": "string",
        "profile": "string",
    }
    [row] = lake.rows("premium", "count", "ratio", "vip", "tags", "profile")
    assert row["count"] == 3 and row["ratio"] == 0.5 and row["vip"] is True
    assert json.loads(row["tags"]) == ["a", "b"] and json.loads(row["profile"]) == {"age": 40}


def test_metadata_key_template_and_no_set_table_are_pipeline_options(lake):
    lake.add_pipeline(
        "users",
        "aerospike",
        metadata_key="meta",
        table="{namespace}_{set}",
        no_set_table="loose",
    )
    renamed = {"meta": WRITE["metadata"], "color": "red"}
    no_set = write("DDDD", 1, LUT, set_name=None, color="grey")
    lake.land("users", "001.jsonl", [{"meta": no_set["metadata"], "color": "grey"}, renamed])
    summary = lake.run("users")
    assert sorted(summary.tables) == ["users_loose", "users_premium"]
    assert lake.rows("users_premium", "digest", "color") == [{"digest": DIGEST, "color": "red"}]
    assert lake.rows("users_loose", "digest", "color") == [{"digest": "DDDD", "color": "grey"}]
    # The default name "metadata" means nothing in this pipeline: such a line is a dead letter.
    lake.land("users", "002.jsonl", [WRITE])
    assert lake.run("users").dead_lettered == 1
    [letter] = lake.dead_letters()
    assert letter["reason"] == "message has no 'meta' object (the pipeline's metadata_key option)"


def test_kafka_key_names_the_set_a_delete_leaves_out(lake):
    lake.add_pipeline("users", "aerospike", envelope="kafka")

    def record(offset: int, value: dict) -> dict:
        return {"topic": "aero", "partition": 0, "offset": offset, "key": KEY, "value": value}

    lake.land("users", "001.jsonl", [record(1, WRITE)])
    lake.run("users")
    lake.land("users", "002.jsonl", [record(2, DELETE)])
    summary = lake.run("users")
    assert summary.deletes_without_table == 0 and summary.tables["premium"].deleted == 1
    assert lake.rows("premium") == []


def test_messages_it_cannot_apply_are_dead_letters_with_the_reason(lake):
    lake.add_pipeline("users", "aerospike")
    touch = {"metadata": {**WRITE["metadata"], "msg": "touch"}}
    no_digest = {"metadata": {k: v for k, v in WRITE["metadata"].items() if k != "digest"}}
    lake.land("users", "001.jsonl", [touch, no_digest, {"color": "red"}, "[1, 2]"])
    summary = lake.run("users")
    assert (summary.lines, summary.messages, summary.dead_lettered) == (4, 0, 4)
    assert [x["reason"] for x in lake.dead_letters()] == [
        "unknown msg 'touch' (expected write or delete)",
        "metadata.digest is missing",
        "message has no 'metadata' object (the pipeline's metadata_key option)",
        "not an aerospike message: expected a JSON object with a metadata object "
        "{msg, namespace, digest…} and the bins",
    ]
