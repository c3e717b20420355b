"""Column types for OceanBase OMS and Canal messages.

Follows seed 001's table "Data formats used when data is transmitted from OceanBase Database to a
message queue system" (integers are Long, DECIMAL is BigDecimal, FLOAT/DOUBLE are Double, binary
types are Base64, DATE is ``YYYY-MM-DD``, TIME has no Spark type, DATETIME is
``YYYY-MM-DD HH:mm:ss[.n] [zone]``, TIMESTAMP is ``seconds[.fraction]``) for the type names that
OMS messages carry: Canal ``mysqlType`` (MySQL column types such as ``bigint(20) unsigned``),
Canal ``sqlType`` (``java.sql.Types`` codes), DataWorks ``schema.column[].type`` and
DefaultExtendColumnType ``__light_type.<col>.schemaType``. docs/oms-types.md is the same table.
"""

from __future__ import annotations

import json
import re

from cdc_ingest.contract import ColumnType, TypeHint

LONG = ColumnType("bigint")
UNSIGNED_LONG = ColumnType("decimal(20,0)")  # BIGINT UNSIGNED reaches 2^64-1: never wrap it
DOUBLE = ColumnType("double")
STRING = ColumnType("string")
BYTES = ColumnType("binary", "base64")
DATE = ColumnType("date")
DATETIME = ColumnType("timestamp_ntz", "datetime")
ZONED_DATETIME = ColumnType("timestamp", "datetime")
TIMESTAMP = ColumnType("timestamp", "oms_timestamp")
DEFAULT_DECIMAL = ColumnType("decimal(38,18)")
MAX_PRECISION = 38

BY_NAME: dict[str, ColumnType] = {
    **dict.fromkeys(
        (
            "tinyint",
            "smallint",
            "mediumint",
            "int",
            "integer",
            "int8",
            "int16",
            "int24",
            "int32",
            "int64",
            "bigint",
            "year",
            "bool",
            "boolean",
            "long",
            "short",
            "serial",
        ),
        LONG,
    ),
    **dict.fromkeys(
        (
            "float",
            "double",
            "real",
            "double precision",
            "binary_float",
            "binary_double",
            "float32",
            "float64",
        ),
        DOUBLE,
    ),
    **dict.fromkeys(
        (
            "char",
            "varchar",
            "varchar2",
            "nchar",
            "nvarchar",
            "nvarchar2",
            "tinytext",
            "text",
            "mediumtext",
            "longtext",
            "enum",
            "set",
            "json",
            "clob",
            "nclob",
            "string",
            "time",
            "interval_day_to_second",
            "interval_year_to_month",
            "interval",
            "rowid",
            "urowid",
            "geometry",
            "point",
            "linestring",
            "polygon",
            "xmltype",
        ),
        STRING,
    ),
    **dict.fromkeys(
        (
            "tinyblob",
            "blob",
            "mediumblob",
            "longblob",
            "binary",
            "varbinary",
            "bit",
            "bytes",
            "raw",
            "long raw",
        ),
        BYTES,
    ),
    "date": DATE,
    "datetime": DATETIME,
    "timestamp": TIMESTAMP,
    "zoned_datetime": ZONED_DATETIME,
    "timestamp with time zone": ZONED_DATETIME,
    "timestamp with local time zone": ZONED_DATETIME,
}

# java.sql.Types codes (Canal's sqlType), used when a message has no mysqlType.
JDBC_TYPES: dict[int, ColumnType] = {
    -7: BYTES,
    -6: LONG,
    5: LONG,
    4: LONG,
    -5: LONG,
    16: LONG,
    6: DOUBLE,
    7: DOUBLE,
    8: DOUBLE,
    2: DEFAULT_DECIMAL,
    3: DEFAULT_DECIMAL,
    1: STRING,
    12: STRING,
    -1: STRING,
    -15: STRING,
    -9: STRING,
    -16: STRING,
    2005: STRING,
    2011: STRING,
    92: STRING,
    -2: BYTES,
    -3: BYTES,
    -4: BYTES,
    2004: BYTES,
    91: DATE,
    93: TIMESTAMP,
    2014: ZONED_DATETIME,
}

_DECIMAL = re.compile(
    r"^(decimal|numeric|number|dec|fixed)\s*(?:\(\s*(\d+)\s*(?:,\s*(-?\d+))?\s*\))?"
)


def _decimal(match: re.Match[str]) -> ColumnType:
    if match.group(2) is None:
        return DEFAULT_DECIMAL
    precision, scale = int(match.group(2)), int(match.group(3) or 0)
    if precision > MAX_PRECISION:
        # Wider than Iceberg holds: keep the scale; values that need more digits dead-letter.
        return ColumnType(f"decimal({MAX_PRECISION},{min(max(scale, 0), MAX_PRECISION)})")
    return ColumnType(f"decimal({precision},{max(scale, 0)})")


def oms_column_type(type_name: str) -> ColumnType:
    """The mirrored column type of one declared source type (unknown names become strings)."""
    text = type_name.strip().lower()
    decimal = _DECIMAL.match(text)
    if decimal:
        return _decimal(decimal)
    base = re.sub(r"\(.*?\)", "", text).replace(" unsigned", "").replace(" zerofill", "").strip()
    if base in ("bigint", "int64", "serial") and "unsigned" in text:
        return UNSIGNED_LONG
    if text.startswith("number"):
        return LONG
    return BY_NAME.get(base, BY_NAME.get(base.split(" ")[0], STRING))


def jdbc_column_type(code: str) -> ColumnType:
    """The mirrored column type of a ``java.sql.Types`` code."""
    try:
        return JDBC_TYPES.get(int(code), STRING)
    except ValueError:
        return STRING


def type_hint_from_names(schema_hint: str) -> TypeHint | None:
    """Types from a hint ``mysql:{col: type name}`` or ``jdbc:{col: java.sql.Types code}``."""
    scheme, _, text = schema_hint.partition(":")
    try:
        declared = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(declared, dict):
        return None
    convert = jdbc_column_type if scheme == "jdbc" else oms_column_type
    return TypeHint({name: convert(str(t)) for name, t in declared.items() if t is not None})
