"""Spark expressions written as SQL text, handed to the JVM in one piece.

Building an expression with pyspark's ``Column`` API costs a py4j round trip per node (every
``F.col``, ``F.lit``, ``&``, ``.when``) and another when Python drops the node's proxy: thousands
of them in a small batch, most of its cost. A projection written as SQL text is parsed by Spark
into the same expressions in a few calls, whatever its size.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Separates the expressions of one projection on their way to the JVM; SQL text never holds it
# (``literal`` escapes control characters, and names holding it are passed one by one).
_SEPARATOR = "\x00"


def name(column: str) -> str:
    """A column name as a quoted identifier (any name, reserved words included)."""
    return "`" + column.replace("`", "``") + "`"


def columns(names: Sequence[str]) -> list[Column]:
    """Columns by their names as written, whatever they hold: ``select("a`b")`` would parse the
    name (a backtick, a dot) and fail or pick another column."""
    from pyspark.sql import functions as F

    return [F.col(name(n)) for n in names]


def literal(value: str | int | bool | None) -> str:
    """A Python value as a SQL literal of the type ``F.lit`` gives it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -(2**31) <= value < 2**31 else f"{value}L"
    escaped = []
    for char in value:
        if char in "\\'":
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or char == "\x7f":
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return "'" + "".join(escaped) + "'"


def select(frame: DataFrame, expressions: list[str]) -> DataFrame:
    """``frame.selectExpr(*expressions)`` in four py4j calls rather than one per expression.

    pyspark hands a list to the JVM element by element; the expressions travel instead as one
    string, split on the JVM side.
    """
    from cdc_ingest import spark_jvm

    if any(_SEPARATOR in expression for expression in expressions):
        return frame.selectExpr(*expressions)
    return spark_jvm.select_split(frame, _SEPARATOR.join(expressions), _SEPARATOR)


def with_columns(frame: DataFrame, expressions: list[str]) -> DataFrame:
    """``frame`` with each of ``expressions`` (``... AS name``) added in a projection of its own,
    so that each later one reads the earlier ones as columns instead of evaluating them again."""
    for expression in expressions:
        frame = select(frame, ["*", expression])
    return frame


def aggregate(frame: DataFrame, keys: list[str], aggregates: list[str]) -> DataFrame:
    """``SELECT keys, aggregates FROM frame GROUP BY keys`` (each key ``expression AS name``), in
    four py4j calls: through a temporary view of a name of its own, dropped once Spark has
    analyzed the query (as pyspark's ``spark.sql`` does with the frames it is given)."""
    from cdc_ingest import spark_jvm

    view = f"_cdc_aggregated_{uuid.uuid4().hex}"
    frame.createOrReplaceTempView(view)
    positions = ", ".join(str(i + 1) for i in range(len(keys)))
    query = f"SELECT {', '.join([*keys, *aggregates])} FROM {view} GROUP BY {positions}"
    return spark_jvm.sql_over_view(frame.sparkSession, query, view)
