"""A table of many typed columns is applied by code Spark can compile.

Typing each column takes a few hundred bytes of generated code; fused into one method by Spark's
whole-stage code generation, the typing of 41 to 100 integer columns grows past the JVM's 64 KB
limit for a method (its default gives up only over 100 fields). Spark then logs an ERROR with the
generated source and runs the stage unfused, after paying for the failed compile; the session's
``spark.sql.codegen.maxFields`` keeps such stages unfused from the start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from canal_messages import canal_message

WIDTH = 48


@pytest.fixture
def compile_failures_raise(spark: Any) -> Iterator[None]:
    """A stage whose generated code does not compile fails instead of running unfused."""
    spark.conf.set("spark.sql.codegen.fallback", "false")
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.codegen.fallback")


def _row(key: int, version: int) -> dict[str, Any]:
    return {"id": key, **{f"c{i}": key * 100 + i + version for i in range(WIDTH)}}


def test_a_table_of_many_integer_columns_is_typed_by_compiled_code(lake, compile_failures_raise):
    types = {"id": "INT", **{f"c{i}": "BIGINT" for i in range(WIDTH)}}
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [canal_message("wide", "INSERT", _row(k, 0), 10 + k, types) for k in range(3)],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [canal_message("wide", "UPDATE", _row(1, 7), 20, types)],
    )

    summary = lake.run("shop")

    assert (summary.tables["wide"].updated, summary.dead_lettered) == (1, 0)
    rows = {r["id"]: r for r in lake.rows("wide")}
    assert (rows[0]["c0"], rows[0]["c47"]) == (0, 47)
    assert (rows[1]["c0"], rows[1]["c47"]) == (107, 154)
    assert (rows[2]["c0"], rows[2]["c47"]) == (200, 247)
