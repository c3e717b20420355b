"""Seed 002 (DataHub Tuple topics): the documented INSERT, UPDATE pair and DELETE, and the rules."""

from __future__ import annotations

import json
import re
from datetime import datetime
from decimal import Decimal

import pytest
from conftest import FIXTURES
from seed_samples import SEEDS

TUPLE = FIXTURES / "datahub-tuple"
DATAHUB_SEED = "002_d284069e5de46625.txt"
KEYS = {"t_shiyu_pk": ["id", "name"]}
METADATA = ("_sequence_id_", "_operation_type_", "_excute_time_", "_before_image_", "_after_image_")


def records() -> list[dict]:
    return [
        json.loads(line)
        for line in (TUPLE / "insert-update-delete.jsonl").read_text().split("\n")
        if line
    ]


INSERT, BEFORE, AFTER, DELETE = records()


def test_fixture_metadata_is_the_seed_table_verbatim() -> None:
    text = (SEEDS / DATAHUB_SEED).read_text(encoding="utf-8")
    table = re.findall(r"^(\d{19}) ([IUD]) (\d{13}) ([YN]) ([YN])$", text, re.M)
    assert table == [tuple(str(record[name]) for name in METADATA) for record in records()]


def test_insert_update_pair_and_delete_one_batch_at_a_time(lake):
    lake.add_pipeline("tuple", "datahub-tuple", keys=KEYS)
    steps = [
        ([INSERT], [{"id": 1, "name": "joe", "comment": "comment"}]),
        ([BEFORE, AFTER], [{"id": 1, "name": "joe", "comment": "com1"}]),
        ([DELETE], []),
    ]
    for index, (lines, expected) in enumerate(steps):
        lake.land("tuple", f"{index:03d}.jsonl", lines)
        summary = lake.run("tuple")
        assert lake.rows("t_shiyu_pk") == expected
    assert summary.tables["t_shiyu_pk"].deleted == 1
    columns = lake.table("t_shiyu_pk").columns
    # The metadata columns are not source columns; the useful ones are kept under _cdc_ names.
    assert not set(METADATA) & set(columns) and "_source_table_" not in columns
    assert {"_cdc_sequence_id", "_cdc_execute_time"} <= set(columns)


def test_the_update_pair_counts_as_one_update_and_the_before_image_changes_nothing(lake):
    lake.add_pipeline("tuple", "datahub-tuple", keys=KEYS)
    lake.land("tuple", "001.jsonl", [INSERT])
    lake.run("tuple")
    lake.land("tuple", "002.jsonl", [BEFORE, AFTER])
    summary = lake.run("tuple")
    assert (summary.lines, summary.messages, summary.no_row_change) == (2, 2, 1)
    assert summary.tables["t_shiyu_pk"].updated == 1
    meta = lake.rows("t_shiyu_pk", "_cdc_sequence_id", "_cdc_execute_time")
    assert meta == [
        {
            "_cdc_sequence_id": 1649991610688000001,
            "_cdc_execute_time": datetime.fromtimestamp(1649991756),
        }
    ]
    assert summary.freshness_ms == 1649991756000


def test_a_pair_split_across_batches_is_neither_lost_nor_applied_wrongly(lake):
    lake.add_pipeline("tuple", "datahub-tuple", keys=KEYS)
    lake.land("tuple", "001.jsonl", [INSERT, BEFORE])  # the batch ends between the halves
    lake.run("tuple")
    assert lake.rows("t_shiyu_pk") == [{"id": 1, "name": "joe", "comment": "comment"}]
    lake.land("tuple", "002.jsonl", [AFTER])
    assert lake.run("tuple").tables["t_shiyu_pk"].updated == 1
    assert lake.rows("t_shiyu_pk") == [{"id": 1, "name": "joe", "comment": "com1"}]


def test_all_four_in_one_batch_collapse_to_the_delete(lake):
    lake.add_pipeline("tuple", "datahub-tuple", keys=KEYS)
    lake.land("tuple", "001.jsonl", records())
    summary = lake.run("tuple")
    assert (summary.messages, summary.no_row_change) == (4, 1)
    assert summary.tables["t_shiyu_pk"].deleted_absent == 1
    assert lake.rows("t_shiyu_pk") == []


def test_columns_option_types_the_topic_schema(lake):
    columns = {
        "id": "BIGINT",
        "name": "STRING",
        "qty": "INTEGER",
        "price": "DECIMAL(10,2)",
        "ratio": "FLOAT",
        "paid": "BOOLEAN",
        "created": "TIMESTAMP",
    }
    lake.add_pipeline("tuple", "datahub-tuple", keys={"orders": ["id"]}, columns=columns)
    record = {
        "id": 7,
        "name": "n",
        "qty": 3,
        "price": "12.50",
        "ratio": 0.25,
        "paid": True,
        "created": 1649991726000123,  # DataHub TIMESTAMP: epoch microseconds
        "_sequence_id_": "1",
        "_operation_type_": "I",
        "_excute_time_": 1649991726000,
        "_source_table_": "orders",
        "_before_image_": "N",
        "_after_image_": "Y",
    }
    lake.land("tuple", "001.jsonl", [record])
    lake.run("tuple")
    table = lake.table("orders")
    types = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    assert {c: types[c] for c in columns} == {
        "id": "bigint",
        "name": "string",
        "qty": "bigint",
        "price": "decimal(10,2)",
        "ratio": "double",
        "paid": "boolean",
        "created": "timestamp",
    }
    [row] = lake.rows("orders")
    assert row["price"] == Decimal("12.50") and row["paid"] is True
    assert row["created"] == datetime.fromtimestamp(1649991726.000123)


def test_without_keys_or_with_an_unknown_operation_records_are_dead_letters(lake):
    lake.add_pipeline("tuple", "datahub-tuple")
    odd = {**INSERT, "_operation_type_": "X"}
    lake.land("tuple", "001.jsonl", [INSERT, odd])
    summary = lake.run("tuple")
    assert summary.dead_lettered == 2
    assert [x["reason"] for x in lake.dead_letters()] == [
        "no key columns known for source table t_shiyu_pk: add it under keys: in pipeline 'tuple'",
        "unknown _operation_type_ 'X' with _before_image_=N, _after_image_=Y (expected I, U or D)",
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"columns": {"id": "INT64"}}, "columns.id: unknown DataHub type 'INT64'"),
        ({"metadata_key": "meta"}, "format 'datahub-tuple' takes no option 'metadata_key'"),
    ],
)
def test_format_options_are_checked_when_the_config_loads(lake, options, message):
    from cdc_ingest.config import ConfigError, load_config

    lake.add_pipeline("tuple", "datahub-tuple", **options)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(lake.config_path)
