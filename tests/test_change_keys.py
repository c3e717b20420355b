"""Key text, target names and configured keys derived per row by ``resolve_changes``.

The derivation has fast paths (a one-column key quoted by concatenation, bare table names looked up
without qualified ones); these tests pin them to what the general path yields.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cdc_ingest.changes.resolve import resolve_changes
from cdc_ingest.config import PipelineConfig

DECODED = (
    "_cdc_file_idx int, _cdc_line bigint, src_db string, src_schema string, src_table string, "
    "op string, kind string, order array<bigint>, image map<string,string>, "
    "key_names array<string>, key_values map<string,string>, error string, read_error string, "
    "row_in_message int, before map<string,string>"
)
# Values a key may hold: plain, JSON-escaped characters, non-ASCII, and characters JSON leaves be.
KEY_VALUES = [
    "42",
    "",
    'say "hi"',
    "back\\slash",
    "tab\there",
    "line\nbreak",
    "nul\x00byte",
    "unit\x1fsep",
    "del\x7f",
    "ünïcødé 中文",
    "a/b",
    "line\u2028sep",
    "emoji \U0001f600",
]


def _decoded(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, DECODED)


def _row(line: int, table: str, image: dict[str, str], **extra: Any) -> tuple[Any, ...]:
    fields: dict[str, Any] = {
        "db": "shop",
        "schema": None,
        "key_names": None,
        "key_values": None,
    } | extra
    return (
        0,
        line,
        fields["db"],
        fields["schema"],
        table,
        "c",
        "upsert",
        [1],
        image,
        fields["key_names"],
        fields["key_values"],
        None,
        None,
        0,
        fields.get("before"),
    )


def test_one_column_key_text_is_the_json_of_its_value(spark: Any) -> None:
    """The text earlier batches stored in tombstones: Spark's ``to_json`` of the value array."""
    from pyspark.sql import functions as F

    pipeline = PipelineConfig("p", "debezium-json", "file:///x", "ns", keys={"t": ("id",)})
    rows = [_row(i, "t", {"id": v}) for i, v in enumerate(KEY_VALUES)]
    resolved = resolve_changes(_decoded(spark, rows), pipeline, 1).orderBy("_cdc_line").collect()
    values = spark.createDataFrame([(i, v) for i, v in enumerate(KEY_VALUES)], "i int, v string")
    by_to_json = values.orderBy("i").select(F.to_json(F.array("v")).alias("text")).collect()
    assert [r["_cdc_key"] for r in resolved] == [r["text"] for r in by_to_json]
    assert [json.loads(r["_cdc_key"]) for r in resolved] == [[v] for v in KEY_VALUES]
    assert resolved[0]["_cdc_key"] == '["42"]'
    assert resolved[2]["_cdc_key"] == '["say \\"hi\\""]'


def test_composite_and_kafka_keys_keep_their_json_text(spark: Any) -> None:
    pipeline = PipelineConfig("p", "debezium-json", "file:///x", "ns", keys={"t": ("a", "b")})
    rows = [
        _row(0, "t", {"a": "1", "b": 'x"y'}),
        _row(1, "u", {"a": "9"}, key_names=["a"], key_values={"a": "7"}),
        _row(2, "u", {"z": "9"}, key_names=["a"]),
    ]
    resolved = resolve_changes(_decoded(spark, rows), pipeline, 1).orderBy("_cdc_line").collect()
    assert [r["_cdc_key"] for r in resolved] == ['["1","x\\"y"]', '["7"]', "[null]"]
    assert resolved[2]["_cdc_error"] == "key column 'a' is missing from the message"


def test_bare_and_qualified_configured_keys(spark: Any) -> None:
    bare = PipelineConfig("p", "lindorm", "file:///x", "ns", keys={"orders": ("id",)})
    qualified = PipelineConfig(
        "p",
        "lindorm",
        "file:///x",
        "ns",
        keys={"shop.orders": ("oid",), "orders": ("id",), "app.crm.people": ("pid",)},
    )
    rows = [
        _row(0, "orders", {"id": "1", "oid": "2"}),
        _row(1, "orders", {"id": "3", "oid": "4"}, db="other"),
        _row(2, "people", {"pid": "5"}, db="app", schema="crm"),
        _row(3, "people", {"pid": "6"}, db="app"),
    ]
    frame = _decoded(spark, rows)
    got = {
        name: [
            (r["_cdc_keys"], r["_cdc_key"])
            for r in resolve_changes(frame, config, 1).orderBy("_cdc_line").collect()
        ]
        for name, config in (("bare", bare), ("qualified", qualified))
    }
    assert got["bare"] == [(["id"], '["1"]'), (["id"], '["3"]'), (None, None), (None, None)]
    assert got["qualified"] == [
        (["oid"], '["2"]'),
        (["id"], '["3"]'),
        (["pid"], '["5"]'),
        (None, None),
    ]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{table}", "order_items"),
        ("{db}_{table}", "shop_eu_order_items"),
        ("Mirror-{table}.v2", "mirror_order_items_v2"),
    ],
)
def test_target_names_are_identifiers(spark: Any, template: str, expected: str) -> None:
    pipeline = PipelineConfig("p", "lindorm", "file:///x", "ns", table=template, keys={"x": ("a",)})
    row = _row(0, "Order-Items", {"a": "1"}, db="Shop.EU")
    (resolved,) = resolve_changes(_decoded(spark, [row]), pipeline, 1).collect()
    assert resolved["_cdc_target"] == expected
