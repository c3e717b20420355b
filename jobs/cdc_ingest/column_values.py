"""Typed column values from row images (``map<string,string>``), with a reason when they don't fit.

Every conversion is a Spark expression. A value that cannot be represented in its column's type is
never truncated or wrapped: the expression yields an error text and the message is dead-lettered.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.formats.base import ColumnType

INTEGRAL = {"tinyint", "smallint", "int", "integer", "bigint", "long"}
INTEGER_TEXT = r"^\s*[+-]?[0-9]+\s*$"
NUMBER_TEXT = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
BASE64_TEXT = r"^[A-Za-z0-9+/\s]*={0,2}\s*$"
BOOLEAN_TEXT = ("true", "false", "1", "0", "t", "f", "yes", "no", "y", "n")


def _connect_decimal(raw: Column, column_type: ColumnType) -> Column:
    """Kafka Connect Decimal: Base64 of the big-endian two's-complement unscaled value.

    Converters configured with ``decimal.handling.mode=string|double`` send plain numbers instead,
    which are cast directly.
    """
    target = column_type.spark_type
    data = F.unbase64(raw)
    unsigned = F.conv(F.hex(data), 16, 10).cast("decimal(38,0)")
    negative = F.ascii(F.substring(F.hex(data), 1, 1)).between(ord("8"), ord("F"))
    modulus = F.pow(F.lit(2), F.octet_length(data) * 8).cast("decimal(38,0)")
    unscaled = F.when(negative, unsigned - modulus).otherwise(unsigned)
    scaled = (unscaled / F.pow(F.lit(10), F.lit(column_type.scale)).cast("decimal(38,0)")).cast(
        target
    )
    return F.when(raw.rlike(NUMBER_TEXT), raw.cast(target)).when(
        raw.rlike(BASE64_TEXT) & (F.octet_length(data) <= 8), scaled
    )


def typed_value(raw: Column, column_type: ColumnType) -> Column:
    """The value of ``raw`` (JSON text) in ``column_type``; null when it does not convert."""
    target = column_type.spark_type
    encoding = column_type.encoding
    base = target.split("(")[0].strip().lower()
    if base == "binary" or encoding == "base64":
        return F.when(raw.rlike(BASE64_TEXT), F.unbase64(raw))
    if encoding == "connect_decimal":
        return _connect_decimal(raw, column_type)
    if encoding == "epoch_days":
        return F.when(
            raw.rlike(INTEGER_TEXT), F.date_add(F.lit("1970-01-01").cast("date"), raw.cast("int"))
        )
    if encoding in ("epoch_millis", "epoch_micros", "epoch_nanos"):
        millis = raw.cast("bigint")
        value = {
            "epoch_millis": F.timestamp_millis(millis),
            "epoch_micros": F.timestamp_micros(millis),
            "epoch_nanos": F.timestamp_micros(F.floor(millis / 1000)),
        }[encoding]
        casted = value if base == "timestamp" else value.cast(target)
        return F.when(raw.rlike(INTEGER_TEXT), casted).otherwise(raw.cast(target))
    if base in INTEGRAL:
        # Spark's cast truncates "3.5" to 3: only whole numbers may become integers.
        return F.when(raw.rlike(INTEGER_TEXT), F.trim(raw).cast(target))
    if base == "boolean":
        return F.when(F.lower(F.trim(raw)).isin(*BOOLEAN_TEXT), F.trim(raw).cast("boolean"))
    if base in ("float", "double", "decimal"):
        return F.when(raw.rlike(NUMBER_TEXT), raw.cast(target))
    if base == "string":
        return raw
    return raw.cast(target)


def column_error(name: str, raw: Column, typed: Column, column_type: ColumnType) -> Column:
    """An error text when a present value did not convert, else null."""
    shown = F.substring(raw, 1, 80)
    return F.when(
        raw.isNotNull() & typed.isNull(),
        F.concat(
            F.lit(f"column '{name}': value '"),
            shown,
            F.lit(f"' is not a valid {column_type.spark_type}"),
        ),
    )
