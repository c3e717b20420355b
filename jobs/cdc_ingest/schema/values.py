"""Typed column values from row images (``map<string,string>``), with a reason when they don't fit.

Every conversion is a Spark expression. A value that cannot be represented in its column's type is
never truncated or wrapped: the expression yields an error text and the message is dead-lettered.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import ColumnType
from cdc_ingest.formats.common import INEXACT

INTEGRAL = {"tinyint", "smallint", "int", "integer", "bigint", "long"}
INTEGER_TEXT = r"^\s*[+-]?[0-9]+\s*$"
NUMBER_TEXT = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
BASE64_TEXT = r"^[A-Za-z0-9+/\s]*={0,2}\s*$"
BOOLEAN_TEXT = ("true", "false", "1", "0", "t", "f", "yes", "no", "y", "n")
DECIMAL_PARTS = r"^\s*[+-]?([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?\s*$"
DATE_TEXT = r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}\s*$"
# Seconds since the epoch with at most microseconds (further digits must be zeros): OMS TIMESTAMP.
EPOCH_SECONDS_TEXT = r"^\s*[+-]?[0-9]+(\.[0-9]{0,6}0*)?\s*$"
# OMS DATETIME / ZONED_DATETIME: date, time, up to 9 fraction digits (beyond 6 only zeros fit
# Iceberg's microseconds), optional zone id or offset; OMS before 3.3.0 used a 'T' and no seconds.
DATETIME_PARTS = (
    r"^\s*([0-9]{4}-[0-9]{2}-[0-9]{2})[ T]([0-9]{2}:[0-9]{2})(:[0-9]{2})?"
    r"(?:\.([0-9]{0,6})0*)?(?:\s+(\S+))?\s*$"
)


def _decimal_bounds(spark_type: str) -> tuple[int, int]:
    inside = spark_type.partition("(")[2].rstrip(") ")
    if not inside:
        return 10, 0  # Spark's bare DECIMAL
    precision, _, scale = inside.partition(",")
    return int(precision), int(scale or 0)


def decimal_fits(raw: Column, spark_type: str) -> Column:
    """Whether the number text ``raw`` is exactly representable in ``decimal(p,s)``.

    Spark's cast rounds extra fraction digits away (``9.99E-308`` becomes ``0``); this compares the
    digits the value needs on each side of the point with what the type holds, from the text.
    """
    precision, scale = _decimal_bounds(spark_type)
    int_part = F.regexp_extract(raw, DECIMAL_PARTS, 1)
    frac_part = F.regexp_extract(raw, DECIMAL_PARTS, 2)
    exponent = F.coalesce(
        F.nullif(F.regexp_extract(raw, DECIMAL_PARTS, 3), F.lit("")).cast("int"), F.lit(0)
    )
    digits = F.concat(int_part, frac_part)
    point = F.length(int_part) + exponent
    leading_zeros = F.length(digits) - F.length(F.regexp_replace(digits, "^0+", ""))
    significant_end = F.length(F.regexp_replace(digits, "0+$", ""))
    zero = F.regexp_replace(digits, "0", "") == ""
    fraction_digits = F.greatest(F.lit(0), significant_end - point)
    integer_digits = F.greatest(F.lit(0), point - leading_zeros)
    fits = (fraction_digits <= scale) & (integer_digits <= precision - scale)
    return F.coalesce(zero | fits, F.lit(False))


def _epoch_seconds(raw: Column) -> Column:
    return F.when(
        raw.rlike(EPOCH_SECONDS_TEXT), F.timestamp_seconds(F.trim(raw).cast("decimal(24,6)"))
    )


def _datetime(raw: Column, target: str) -> Column:
    """``YYYY-MM-DD HH:mm[:ss][.f] [zone]``: a zone makes it an instant, else a wall-clock time."""
    date = F.regexp_extract(raw, DATETIME_PARTS, 1)
    minutes = F.regexp_extract(raw, DATETIME_PARTS, 2)
    seconds = F.coalesce(
        F.nullif(F.regexp_extract(raw, DATETIME_PARTS, 3), F.lit("")), F.lit(":00")
    )
    fraction = F.rpad(F.regexp_extract(raw, DATETIME_PARTS, 4), 6, "0")
    zone = F.regexp_extract(raw, DATETIME_PARTS, 5)
    wall = F.concat(date, F.lit(" "), minutes, seconds, F.lit("."), fraction)
    zoned = F.to_timestamp(F.concat(wall, F.lit(" "), zone), "yyyy-MM-dd HH:mm:ss.SSSSSS VV")
    local = F.to_timestamp(wall, "yyyy-MM-dd HH:mm:ss.SSSSSS")
    # Session time zone is UTC: a zoned value lands as its UTC wall-clock time in timestamp_ntz.
    value = F.when(zone == "", local).otherwise(zoned)
    typed = value.cast(target) if target != "timestamp" else value
    return F.when(raw.rlike(DATETIME_PARTS), typed)


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


def typed_value(marked: Column, column_type: ColumnType) -> Column:
    """The value of ``raw`` (JSON text) in ``column_type``; null when it does not convert."""
    target = column_type.spark_type
    if target.startswith("decimal"):
        # A decimal must be exact: a number Spark's reader rounded to a double cannot be one.
        raw = F.when(~marked.startswith(INEXACT), marked)
    else:
        raw = F.when(marked.startswith(INEXACT), F.substring(marked, len(INEXACT) + 1, 1 << 20))
        raw = raw.otherwise(marked)
    encoding = column_type.encoding
    base = target.split("(")[0].strip().lower()
    if encoding == "latin1":
        # Canal writes binary values as the ISO-8859-1 decoding of their bytes.
        return F.encode(raw, "ISO-8859-1")
    if base == "binary" or encoding == "base64":
        return F.when(raw.rlike(BASE64_TEXT), F.unbase64(raw))
    if encoding == "connect_decimal":
        return _connect_decimal(raw, column_type)
    if encoding == "epoch_seconds":
        value = _epoch_seconds(raw)
        return value if base == "timestamp" else value.cast(target)
    if encoding == "datetime":
        return _datetime(raw, target)
    if encoding == "oms_timestamp":
        # seconds[.fraction] since OMS 3.3.0 (integer seconds before); Canal sends date-time text.
        seconds = _epoch_seconds(raw)
        return F.when(raw.rlike(EPOCH_SECONDS_TEXT), seconds).otherwise(_datetime(raw, target))

    if base == "date" and encoding == "plain":
        return F.when(raw.rlike(DATE_TEXT), F.trim(raw).cast("date"))
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
    if base == "decimal":
        return F.when(raw.rlike(NUMBER_TEXT) & decimal_fits(raw, target), raw.cast(target))
    if base in ("float", "double"):
        # JSON's non-numeric numbers (as Spark's reader accepts them) are doubles too.
        special = F.trim(raw).isin("NaN", "Infinity", "-Infinity", "+Infinity")
        return F.when(raw.rlike(NUMBER_TEXT) | special, F.trim(raw).cast(target))
    if base == "string":
        return raw
    return raw.cast(target)


def column_error(name: str, raw: Column, typed: Column, column_type: ColumnType) -> Column:
    """An error text when a present value did not convert, else null."""
    shown = F.substring(F.regexp_replace(raw, INEXACT, ""), 1, 80)
    problem = f"is not a valid {column_type.spark_type}"
    if column_type.spark_type.startswith("decimal"):
        problem = f"does not fit {column_type.spark_type} without rounding"
        inexact = (
            f"') has more digits than Spark's JSON reader keeps for a number, and a "
            f"{column_type.spark_type} must be exact (send DECIMAL values as JSON strings)"
        )
        return F.when(
            raw.startswith(INEXACT),
            F.concat(F.lit(f"column '{name}': the number (read as '"), shown, F.lit(inexact)),
        ).when(
            raw.isNotNull() & typed.isNull(),
            F.concat(F.lit(f"column '{name}': value '"), shown, F.lit(f"' {problem}")),
        )
    elif column_type.encoding in ("datetime", "oms_timestamp", "epoch_seconds"):
        problem += " (unknown zone, or digits beyond microseconds)"
    return F.when(
        raw.isNotNull() & typed.isNull(),
        F.concat(F.lit(f"column '{name}': value '"), shown, F.lit(f"' {problem}")),
    )
