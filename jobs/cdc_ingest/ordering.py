"""The ordering value as the tables store it: ``binary``, compared byte by byte as the list it
encodes compares element by element.

A change's ordering value is a list of bigints (the vendor's order, then the batch, file, line
and row it was landed at). Tables keep it as ``binary``, eight bytes per element, big-endian with
the sign bit flipped, so that unsigned byte order (Spark's and Arrow's order of ``binary``) is
the list's order, and a list that is a prefix of another sorts first, as it does as a list. A list
column would cost every read of the table its vectorization: Iceberg reads Parquet vectorized only
when every projected column is primitive, and the classification reads every row's key and
order.

A null element (a field a change does not have, such as Debezium's ``lsn`` from MySQL) is stored
as the smallest bigint, so it sorts first, as a null element does when Spark compares lists (it
ties only with the smallest bigint itself).
"""

from __future__ import annotations

import struct

# Bytes per element of the list.
ELEMENT_BYTES = 8
_SIGN = 1 << 63
_FLIP = "shiftleft(CAST(1 AS BIGINT), 63)"
_UNROLLED = 10
# Casting a bigint to binary (big-endian) is refused with spark.sql.ansi.enabled, which the
# session turns off (spark_session.session_conf).


def element_sql(value: str) -> str:
    """SQL text: one bigint (text of an expression) as its stored eight bytes."""
    return f"CAST(coalesce(CAST({value} AS BIGINT), {_FLIP}) ^ {_FLIP} AS BINARY)"


def encoded_sql(values: str, *more: str) -> str:
    """SQL text: an ``array<bigint>`` (text of an expression), then the bigints ``more``, as the
    stored ``binary`` of the list of all of them."""
    # A cast per element, far cheaper than hex text. Lists of up to _UNROLLED elements (every
    # format's: Debezium's has nine) are cast element by element in generated code; longer ones
    # through Spark's higher-order functions, which Spark 3.5 evaluates interpreted, row by row.
    unrolled = " ".join(
        f"WHEN {n} THEN concat({', '.join(element_sql(f'{values}[{i}]') for i in range(n))})"
        for n in range(1, _UNROLLED + 1)
    )
    each = f"transform({values}, _v -> {element_sql('_v')})"
    folded = f"aggregate({each}, X'', (_a, _b) -> concat(_a, _b))"
    joined = f"CASE size({values}) WHEN 0 THEN X'' {unrolled} ELSE {folded} END"
    return f"concat({joined}, {', '.join(element_sql(m) for m in more)})" if more else joined


def elements_sql(order: str, first: int, count: int | None = None) -> str:
    """SQL text: ``count`` elements of a stored order from element ``first`` (1-based; negative
    counts from the end, -1 the last), or all from there when ``count`` is None, as ``binary``."""
    start = (
        f"{(first - 1) * ELEMENT_BYTES + 1}"
        if first > 0
        else f"octet_length({order}) - {-first * ELEMENT_BYTES - 1}"
    )
    length = "2147483647" if count is None else str(count * ELEMENT_BYTES)
    return f"substring({order}, {start}, {length})"


def without_last_sql(order: str, count: int) -> str:
    """SQL text: a stored order without its last ``count`` elements."""
    return f"substring({order}, 1, octet_length({order}) - {count * ELEMENT_BYTES})"


def encode(values: list[int | None]) -> bytes:
    """An ordering value's stored bytes."""
    return b"".join(
        struct.pack(">Q", ((-_SIGN if v is None else v) + _SIGN) % (1 << 64)) for v in values
    )


def decode(stored: bytes | bytearray) -> list[int]:
    """The list of bigints a stored ordering value holds."""
    count = len(stored) // ELEMENT_BYTES
    return [v - _SIGN for v in struct.unpack(f">{count}Q", bytes(stored))]
