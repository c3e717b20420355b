"""A table of many typed columns is applied by code Spark can compile.

Typing each column takes a few hundred bytes of generated code; fused into one method by Spark's
whole-stage code generation, the typing of 41 to 100 integer columns grows past the JVM's 64 KB
limit for a method (its default gives up only over 100 fields). Spark then logs an ERROR with the
generated source and runs the stage unfused, after paying for the failed compile; the session's
``spark.sql.codegen.maxFields`` keeps such stages unfused from the start.

A wider table's changes are typed by column type, a narrow one's column by column
(``typed_changes.types_by_type``): the same values and the same dead letters either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from canal_messages import canal_message, typed_message

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


TYPES = {
    "id": "INT",
    "qty": "BIGINT",
    "price": "DECIMAL(6,2)",
    "born": "DATE",
    "note": "VARCHAR(20)",
    "amount": "BIGINT",
}
# Text columns beyond the typed ones: none, or enough for the wide route.
PADDING = {"narrow": 0, "wide": 150}


def _typed_row(key: int, padding: int, **values: str) -> dict[str, str]:
    row = {"id": str(key), "qty": "5", "price": "12.50", "born": "2020-01-02", "note": "hello"}
    return {**row, "amount": "7", **values, **{f"p{i}": f"p{i}" for i in range(padding)}}


@pytest.mark.parametrize("held", [False, True], ids=["created", "existing"])
@pytest.mark.parametrize("width", list(PADDING))
def test_values_and_dead_letters_do_not_depend_on_the_tables_width(lake, held, width):
    padding = PADDING[width]
    types = {**TYPES, **{f"p{i}": "VARCHAR(10)" for i in range(padding)}}
    lake.add_pipeline("shop", "canal-json")
    if held:
        lake.land(
            "shop",
            "000.json",
            [typed_message("items", "INSERT", _typed_row(100, padding), 1, types)],
        )
        lake.run("shop")
    lines = [
        typed_message("items", "INSERT", _typed_row(1, padding), 10, types),
        typed_message("items", "UPDATE", _typed_row(1, padding, qty="lots"), 11, types),
        typed_message("items", "INSERT", _typed_row(3, padding, price="1.005"), 12, types),
        typed_message("items", "INSERT", _typed_row(4, padding, born="yesterday"), 13, types),
        typed_message("items", "INSERT", _typed_row(5, padding, qty="x", price="y"), 14, types),
        # Its image holds the later column first: the first column that fails, in the table's
        # order, is named.
        typed_message(
            "items", "INSERT", _later_first(_typed_row(6, padding, qty="q", amount="s")), 15, types
        ),
    ]
    lake.land("shop", "001.json", lines)

    summary = lake.run("shop")

    assert (summary.tables["items"].inserted, summary.tables["items"].dead_lettered) == (1, 5)
    pads = {f"p{i}": f"p{i}" for i in range(padding)}
    typed = {
        "qty": 5,
        "price": Decimal("12.50"),
        "born": date(2020, 1, 2),
        "note": "hello",
        "amount": 7,
    }
    held_rows = [{"id": 100, **typed, **pads}] if held else []
    assert lake.rows("items") == [{"id": 1, **typed, **pads}, *held_rows]
    assert sorted((d["line"], d["reason"]) for d in lake.dead_letters()) == [
        (2, "column 'qty': value 'lots' is not a valid bigint"),
        (3, "column 'price': value '1.005' does not fit decimal(6,2) without rounding"),
        (4, "column 'born': value 'yesterday' is not a valid date"),
        (5, "column 'qty': value 'x' is not a valid bigint"),
        (6, "column 'qty': value 'q' is not a valid bigint"),
    ]


def _later_first(row: dict[str, str]) -> dict[str, str]:
    """The row with its ``amount`` value before the others, as a source may send an image."""
    return {"amount": row["amount"], **row}
