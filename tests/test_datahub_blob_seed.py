"""Seed 002 (DataWorks → DataHub Blob topics): every Blob sample, verbatim, through datahub-blob.

The samples mirror ``yunshi_db.t_shiyu_pk`` (composite key ``id``, ``name``): INSERT with comment
'comment', an UPDATE as the pair UPDATE_BEFOR / UPDATE_AFTER sharing one sequenceId (comment
'com1'), DELETE; then a heartbeat and an ALTER of another table.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime

from conftest import FIXTURES
from seed_samples import DATAHUB_SEED, json_object_samples

BLOB = FIXTURES / "datahub-blob"
SEED_ORDER = ("insert", "update-before", "update-after", "delete", "heartbeat", "alter")
TABLE = "t_shiyu_pk"
JOE = {"id": 1, "name": "joe"}
NOT_A_MESSAGE = "line is neither a JSON object nor the Base64 of one"


def sample(name: str) -> str:
    return (BLOB / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()[0]


def as_base64(line: str) -> str:
    return base64.b64encode(line.encode("utf-8")).decode("ascii")


def with_op(name: str, op: str, **payload: object) -> str:
    """A seed sample with another ``payload.op`` (and payload fields replaced)."""
    message = json.loads(sample(name))
    message["payload"].update(op=op, **payload)
    return json.dumps(message)


def test_fixtures_are_the_seed_samples_verbatim() -> None:
    seed = json_object_samples(DATAHUB_SEED)
    assert [json.loads(sample(n)) for n in SEED_ORDER] == seed
    # One compact line each: nothing but the seed's layout whitespace was dropped.
    compact = [json.dumps(s, ensure_ascii=False, separators=(",", ":")) for s in seed]
    assert [sample(n) for n in SEED_ORDER] == compact


def test_insert_update_pair_and_delete_one_batch_each(lake):
    lake.add_pipeline("blob", "datahub-blob")
    lake.land("blob", "001.json", [sample("insert")])
    s1 = lake.run("blob")
    assert (s1.messages, s1.dead_lettered, s1.tables[TABLE].inserted) == (1, 0, 1)
    assert s1.freshness_ms == 1605339932000
    types = {f.name: f.dataType.simpleString() for f in lake.table(TABLE).schema.fields}
    assert [types[c] for c in ("id", "name", "comment")] == ["bigint", "string", "string"]
    assert lake.rows(TABLE) == [{**JOE, "comment": "comment"}]

    lake.land("blob", "002.json", [sample("update-before"), sample("update-after")])
    s2 = lake.run("blob")
    # The before image changes no row; the after image (same sequenceId) is the update.
    assert (s2.messages, s2.no_row_change, s2.dead_lettered) == (2, 1, 0)
    assert (s2.tables[TABLE].updated, s2.tables[TABLE].messages) == (1, 1)
    assert lake.rows(TABLE) == [{**JOE, "comment": "com1"}]

    lake.land("blob", "003.json", [sample("delete")])
    assert lake.run("blob").tables[TABLE].deleted == 1
    assert lake.rows(TABLE) == []


def test_composite_key_from_primary_key_identifies_rows(lake):
    lake.add_pipeline("blob", "datahub-blob")
    other_name = sample("insert").replace('"name":"joe"', '"name":"ann"')
    lake.land("blob", "001.json", [sample("insert"), other_name])
    assert lake.run("blob").tables[TABLE].inserted == 2
    lake.land("blob", "002.json", [sample("update-before"), sample("update-after")])
    lake.run("blob")
    # Only (1, joe) changes: (1, ann) shares id but not name.
    assert lake.rows(TABLE) == [
        {"id": 1, "name": "ann", "comment": "comment"},
        {**JOE, "comment": "com1"},
    ]
    lake.land("blob", "003.json", [sample("delete")])
    lake.run("blob")
    assert lake.rows(TABLE) == [{"id": 1, "name": "ann", "comment": "comment"}]


def test_before_image_alone_changes_nothing_until_its_after_image_lands(lake):
    lake.add_pipeline("blob", "datahub-blob")
    lake.land("blob", "001.json", [sample("insert"), sample("update-before")])
    s1 = lake.run("blob")
    assert (s1.tables[TABLE].inserted, s1.no_row_change) == (1, 1)
    assert lake.rows(TABLE) == [{**JOE, "comment": "comment"}]
    lake.land("blob", "002.json", [sample("update-after")])
    assert lake.run("blob").tables[TABLE].updated == 1
    assert lake.rows(TABLE) == [{**JOE, "comment": "com1"}]


def test_all_samples_in_one_batch_collapse_to_the_delete(lake):
    lake.add_pipeline("blob", "datahub-blob")
    lake.land("blob", "001.json", [sample(n) for n in SEED_ORDER])
    summary = lake.run("blob")
    # MHEARTBEAT, UPDATE_BEFOR and the ALTER change no row; nothing is dead-lettered.
    assert (summary.lines, summary.messages, summary.dead_lettered) == (6, 6, 0)
    assert (summary.no_row_change, summary.ddl_recorded) == (3, 1)
    assert summary.tables[TABLE].messages == 3
    assert lake.rows(TABLE) == []


def test_update_variants_before_spelled_out_update_and_lower_case(lake):
    lake.add_pipeline("blob", "datahub-blob")
    before = json.loads(sample("update-before"))["payload"]["before"]
    seq = "1605339516000000007"
    both = {"before": before, "after": {"dataColumn": {**JOE, "comment": "com2"}}}
    lines = [
        sample("insert"),
        with_op("update-before", "UPDATE_BEFORE"),
        with_op("update-after", "update_after"),
        # Paimon's aliyun data: one UPDATE carrying both images.
        with_op("update-after", "UPDATE", sequenceId=seq, **both),
    ]
    lake.land("blob", "001.json", lines)
    summary = lake.run("blob")
    assert (summary.messages, summary.no_row_change, summary.dead_lettered) == (4, 1, 0)
    assert lake.rows(TABLE) == [{**JOE, "comment": "com2"}]


def test_heartbeat_changes_no_row_and_advances_freshness(lake):
    lake.add_pipeline("blob", "datahub-blob")
    lake.land("blob", "001.json", [sample("heartbeat")])
    summary = lake.run("blob")
    assert (summary.messages, summary.no_row_change, summary.dead_lettered) == (1, 1, 0)
    assert summary.freshness_ms == 1605339953629
    assert not summary.tables


def test_alter_is_kept_in_ddl_history_not_dead_lettered(lake):
    lake.add_pipeline("blob", "datahub-blob")
    control = [with_op("heartbeat", op) for op in ("TRANSACTION_BEGIN", "GTID", "TRANSACTION_END")]
    lake.land("blob", "001.json", [sample("alter"), *control])
    summary = lake.run("blob")
    assert (summary.messages, summary.dead_lettered) == (4, 0)
    assert (summary.ddl_recorded, summary.no_row_change) == (1, 4)
    assert lake.dead_letters() == []
    [ddl] = [r.asDict() for r in lake.table("_cdc_ddl_history").collect()]
    assert (ddl["line"], ddl["op"], ddl["source_table"], ddl["target_table"], ddl["status"]) == (
        1,
        "ALTER",
        "test_db.t_test_nopk",
        "t_test_nopk",
        "no_change",
    )
    # The seed's ALTER names a table this lake never saw: there is nothing to alter.
    assert ddl["detail"] == "no such table in the mirror yet"
    assert ddl["statement"] == "alter table t_test_nopk add column holo text"
    assert ddl["event_time"] == datetime(2020, 11, 14, 8, 21, 49)
    assert not summary.tables


def test_base64_lines_give_the_same_table_as_json_lines(lake):
    steps = [["insert"], ["update-before", "update-after"], ["heartbeat", "alter"]]
    lake.add_pipeline("text", "datahub-blob")
    lake.add_pipeline("b64", "datahub-blob", namespace="b64")
    for step, names in enumerate(steps):
        lake.land("text", f"{step}.json", [sample(n) for n in names])
        lake.land("b64", f"{step}.json", [as_base64(sample(n)) for n in names])
        text, b64 = lake.run("text"), lake.run("b64")
        assert (b64.messages, b64.dead_lettered, b64.no_row_change, b64.freshness_ms) == (
            text.messages,
            text.dead_lettered,
            text.no_row_change,
            text.freshness_ms,
        )
        assert lake.rows(TABLE, namespace="b64") == lake.rows(TABLE)
    assert lake.rows(TABLE, namespace="b64") == [{**JOE, "comment": "com1"}]
    assert lake.table("_cdc_ddl_history", "b64").count() == 1


def test_base64_values_in_a_kafka_envelope(lake):
    lake.add_pipeline("blob", "datahub-blob", envelope="kafka")
    envelopes = [
        {"topic": "blob", "partition": 0, "offset": n, "key": None, "value": as_base64(sample(m))}
        for n, m in enumerate(("insert", "update-before", "update-after"))
    ]
    lake.land("blob", "001.json", envelopes)
    summary = lake.run("blob")
    assert (summary.messages, summary.dead_lettered) == (3, 0)
    assert lake.rows(TABLE) == [{**JOE, "comment": "com1"}]


def test_lines_that_are_no_blob_message_are_dead_letters_with_reasons(lake):
    lake.add_pipeline("blob", "datahub-blob")
    lines = [
        "this is no message",
        as_base64("hello"),
        "{not json",
        as_base64("{not json"),
        with_op("insert", "UPSERT"),
        json.dumps({"schema": {}, "payload": {"after": {"dataColumn": {"id": 1}}}}),
        sample("insert"),
    ]
    lake.land("blob", "001.json", lines)
    summary = lake.run("blob")
    assert (summary.lines, summary.messages, summary.dead_lettered) == (7, 1, 6)
    letters = lake.dead_letters()
    assert [(x["line"], x["reason"]) for x in letters] == [
        (1, NOT_A_MESSAGE),
        (2, NOT_A_MESSAGE),
        (3, "line is not valid JSON"),
        (4, "line is not valid JSON"),
        (5, "unknown op 'UPSERT'"),
        (6, "message has no payload.op"),
    ]
    assert letters[1]["raw"] == as_base64("hello")  # dead letters keep the landed line
    assert lake.rows(TABLE) == [{**JOE, "comment": "comment"}]


TYPED = {
    "schema": {
        "dataColumn": [
            {"name": "id", "type": "LONG"},
            {"name": "active", "type": "BOOLEAN"},
            {"name": "score", "type": "DOUBLE"},
            {"name": "born", "type": "DATE"},
            {"name": "photo", "type": "BYTES"},
            {"name": "note", "type": "STRING"},
        ],
        "source": {"dbName": "yunshi_db", "dbType": "MySQL", "tableName": "t_types"},
        "primaryKey": ["id"],
    },
    "payload": {
        "op": "INSERT",
        "after": {
            "dataColumn": {
                "id": 7,
                "active": True,
                "score": "1.100000",
                "born": 1605339932000,
                "photo": "dGVzdF90ZXh0MTIz",  # the seed's example: Base64 of test_text123
                "note": "x",
            }
        },
        "sequenceId": "1605339516000000004",
        "timestamp": {"eventTime": 1605339932000},
    },
    "version": "0.0.1",
}


def test_date_is_a_timestamp_from_epoch_millis_and_bytes_are_base64(lake):
    lake.add_pipeline("blob", "datahub-blob")
    bad_date = json.loads(json.dumps(TYPED))
    bad_date["payload"]["after"]["dataColumn"].update(id=8, born="yesterday")
    lake.land("blob", "001.json", [TYPED, bad_date])
    summary = lake.run("blob")
    assert (summary.messages, summary.dead_lettered) == (1, 1)
    types = {f.name: f.dataType.simpleString() for f in lake.table("t_types").schema.fields}
    assert [types[c] for c in ("id", "active", "score", "born", "photo", "note")] == [
        "bigint",
        "boolean",
        "double",
        "timestamp",
        "binary",
        "string",
    ]
    assert lake.rows("t_types") == [
        {
            "id": 7,
            "active": True,
            "score": 1.1,
            "born": datetime(2020, 11, 14, 7, 45, 32),  # 1605339932000 ms, UTC session
            "photo": bytearray(b"test_text123"),
            "note": "x",
        }
    ]
    [letter] = lake.dead_letters()
    assert letter["reason"] == "column 'born': value 'yesterday' is not a valid timestamp"


def keyless(name: str) -> dict:
    """A seed sample of a table without a primary key (DataHub shards it by table name)."""
    message = json.loads(sample(name))
    del message["schema"]["primaryKey"]
    return message


def test_a_table_without_primary_key_is_append_only(lake):
    lake.add_pipeline("blob", "datahub-blob")
    lake.land("blob", "001.json", [keyless("insert"), keyless("update-before")])
    first = lake.run("blob")
    assert first.tables[TABLE].append_only and first.tables[TABLE].inserted == 1
    lake.land("blob", "002.json", [keyless("update-after"), keyless("delete")])
    second = lake.run("blob")
    table = second.tables[TABLE]
    assert (table.messages, table.inserted, table.append_only_deletes) == (2, 1, 1)
    assert f"{TABLE} (append-only: no key): 2 messages -> appended 1; deletes skipped 1" in (
        second.render()
    )
    # Every row image the source sent, in stream order; the delete removed nothing.
    ordered = lake.table(TABLE).orderBy("_cdc_order").select("id", "name", "comment").collect()
    assert [r.asDict() for r in ordered] == [
        {**JOE, "comment": "comment"},
        {**JOE, "comment": "com1"},
    ]
    # No identifier fields: nothing to match rows on.
    assert (
        lake.spark.sql(f"SHOW TBLPROPERTIES {lake.catalog}.ods.{TABLE}")
        .where("key = 'cdc.keys' AND value != ''")
        .count()
        == 0
    )


def test_configured_keys_turn_a_keyless_table_into_a_mirror(lake):
    lake.add_pipeline("blob", "datahub-blob", keys={TABLE: ["id"]})
    lake.land("blob", "001.json", [keyless("insert"), keyless("update-after")])
    summary = lake.run("blob")
    assert not summary.tables[TABLE].append_only
    assert lake.rows(TABLE) == [{**JOE, "comment": "com1"}]
