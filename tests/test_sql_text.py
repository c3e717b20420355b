"""Spark expressions written as SQL text (``cdc_ingest.sql_text``): what the text says is what
Spark reads, and a projection costs a few py4j calls whatever its size."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from cdc_ingest import sql_text

VALUES: list[Any] = [
    "it's",
    'say "hi"',
    "back\\slash \\p{L} \\\\",
    "line\nbreak\ttab\r\x00nul\x1fend\x7f",
    "é 中文 😀",
    "",
    "%_*",
    0,
    -(2**31),
    2**31 - 1,
    2**31,
    -(2**63),
    True,
    False,
    None,
]


def test_literals_read_back_as_the_python_values(spark: Any) -> None:
    frame = sql_text.select(
        spark.range(1), [f"{sql_text.literal(v)} AS v{i}" for i, v in enumerate(VALUES)]
    )
    assert list(frame.collect()[0]) == VALUES
    types = [field.dataType.simpleString() for field in frame.schema.fields]
    # The types F.lit gives: int within 32 bits, bigint beyond.
    assert types[7:12] == ["int", "int", "int", "bigint", "bigint"]


@pytest.mark.parametrize("column", ["order", "a.b", "with `backtick`", "space and ü", "select"])
def test_any_column_name_is_read_by_its_quoted_name(spark: Any, column: str) -> None:
    frame = spark.createDataFrame([(1, "x")], ["id", "v"]).withColumnRenamed("v", column)
    picked = sql_text.select(frame, [sql_text.name(column), f"{sql_text.name(column)} AS copy"])
    assert picked.columns == [column, "copy"]
    assert list(picked.collect()[0]) == ["x", "x"]


@contextmanager
def counted_py4j_calls() -> Iterator[list[int]]:
    """py4j calls of this thread (py4j releases dropped proxies from a thread of its own)."""
    import threading

    import py4j.clientserver

    calls = [0]
    original = py4j.clientserver.ClientServerConnection.send_command
    caller = threading.get_ident()

    def counted(self: Any, command: str) -> Any:
        if threading.get_ident() == caller:
            calls[0] += 1
        return original(self, command)

    py4j.clientserver.ClientServerConnection.send_command = counted
    try:
        yield calls
    finally:
        py4j.clientserver.ClientServerConnection.send_command = original


def test_a_projection_costs_a_few_py4j_calls_whatever_its_size(spark: Any) -> None:
    frame = spark.range(3)
    expressions = [f"id + {i} AS c{i}" for i in range(200)]
    with counted_py4j_calls() as calls:
        projected = sql_text.select(frame, expressions)
    # pyspark's selectExpr hands the list over element by element: 200 calls and more.
    assert calls[0] <= 6
    assert projected.collect()[0][199] == 199


def test_resolving_a_batch_costs_a_few_py4j_calls(spark: Any) -> None:
    from cdc_ingest.changes.resolve import resolve_changes
    from cdc_ingest.config import PipelineConfig

    decoded = spark.createDataFrame(
        [("shop", None, "orders", "upsert", ["id"], {"id": "1"}, {"id": "1"}, {"id": "2"})],
        "src_db string, src_schema string, src_table string, kind string,"
        " key_names array<string>, key_values map<string,string>, image map<string,string>,"
        " before map<string,string>",
    ).selectExpr(
        "*",
        "array(CAST(1 AS BIGINT)) AS order",
        "CAST(NULL AS STRING) AS error",
        "CAST(NULL AS STRING) AS read_error",
        "0 AS _cdc_file_idx",
        "1 AS _cdc_line",
        "0 AS row_in_message",
    )
    decoded.columns  # noqa: B018 (the schema, fetched once, is not the resolution's cost)
    pipeline = PipelineConfig(
        name="shop",
        format="debezium-json",
        landing="file:///unused",
        namespace="unused",
        table="{db}_{table}",
        keys={"orders": ("id",)},
        exclude_tables="audit_.*",
    )
    with counted_py4j_calls() as calls:
        resolved = resolve_changes(decoded, pipeline, 7)
    # Built call by call, the same projections cost over 800 calls.
    assert calls[0] <= 40
    row = resolved.collect()[0]
    assert (row["_cdc_target"], row["_cdc_key"], row["_cdc_old_key"]) == (
        "shop_orders",
        '["1"]',
        '["2"]',
    )
    # The vendor's order, then batch, file, line and row, eight bytes each (sign bit flipped).
    assert bytes(row["_cdc_order"]).hex() == (
        "80000000000000018000000000000007800000000000000080000000000000018000000000000000"
    )
