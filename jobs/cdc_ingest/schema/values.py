"""Typed column values from row images (``map<string,string>``), with a reason when they don't fit.

Every conversion is a Spark expression, written as SQL text (see ``sql_text``). A value that
cannot be represented in its column's type is never truncated or wrapped: the expression yields an
error text and the message is dead-lettered.
"""

from __future__ import annotations

from cdc_ingest.contract import ColumnType
from cdc_ingest.formats.common import INEXACT
from cdc_ingest.sql_text import literal

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


def decimal_fits(raw: str, spark_type: str) -> str:
    """Whether the number text ``raw`` is exactly representable in ``decimal(p,s)``.

    Spark's cast rounds extra fraction digits away (``9.99E-308`` becomes ``0``); this compares the
    digits the value needs on each side of the point with what the type holds, from the text.
    """
    precision, scale = _decimal_bounds(spark_type)
    parts = literal(DECIMAL_PARTS)
    int_part = f"regexp_extract({raw}, {parts}, 1)"
    frac_part = f"regexp_extract({raw}, {parts}, 2)"
    exponent = f"coalesce(CAST(nullif(regexp_extract({raw}, {parts}, 3), '') AS INT), 0)"
    digits = f"concat({int_part}, {frac_part})"
    point = f"(length({int_part}) + {exponent})"
    leading_zeros = f"(length({digits}) - length(regexp_replace({digits}, '^0+', '')))"
    significant_end = f"length(regexp_replace({digits}, '0+$', ''))"
    zero = f"(regexp_replace({digits}, '0', '') = '')"
    fraction_digits = f"greatest(0, ({significant_end} - {point}))"
    integer_digits = f"greatest(0, ({point} - {leading_zeros}))"
    fits = f"({fraction_digits} <= {scale} AND {integer_digits} <= {precision - scale})"
    return f"coalesce(({zero} OR {fits}), false)"


def _when(condition: str, value: str) -> str:
    return f"CASE WHEN {condition} THEN {value} END"


def _matches(raw: str, pattern: str) -> str:
    return f"({raw} RLIKE {literal(pattern)})"


def _epoch_seconds(raw: str) -> str:
    seconds = f"timestamp_seconds(CAST(trim({raw}) AS DECIMAL(24,6)))"
    return _when(_matches(raw, EPOCH_SECONDS_TEXT), seconds)


def _datetime(raw: str, target: str) -> str:
    """``YYYY-MM-DD HH:mm[:ss][.f] [zone]``: a zone makes it an instant, else a wall-clock time."""
    parts = literal(DATETIME_PARTS)
    date = f"regexp_extract({raw}, {parts}, 1)"
    minutes = f"regexp_extract({raw}, {parts}, 2)"
    seconds = f"coalesce(nullif(regexp_extract({raw}, {parts}, 3), ''), ':00')"
    fraction = f"rpad(regexp_extract({raw}, {parts}, 4), 6, '0')"
    zone = f"regexp_extract({raw}, {parts}, 5)"
    wall = f"concat({date}, ' ', {minutes}, {seconds}, '.', {fraction})"
    zoned = f"to_timestamp(concat({wall}, ' ', {zone}), 'yyyy-MM-dd HH:mm:ss.SSSSSS VV')"
    local = f"to_timestamp({wall}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')"
    # Session time zone is UTC: a zoned value lands as its UTC wall-clock time in timestamp_ntz.
    value = f"CASE WHEN {zone} = '' THEN {local} ELSE {zoned} END"
    typed = f"CAST({value} AS {target})" if target != "timestamp" else value
    return _when(_matches(raw, DATETIME_PARTS), typed)


def _connect_decimal(raw: str, column_type: ColumnType) -> str:
    """Kafka Connect Decimal: Base64 of the big-endian two's-complement unscaled value.

    Converters configured with ``decimal.handling.mode=string|double`` send plain numbers instead,
    which are cast directly.
    """
    target = column_type.spark_type
    data = f"unbase64({raw})"
    unsigned = f"CAST(conv(hex({data}), 16, 10) AS DECIMAL(38,0))"
    negative = f"(ascii(substring(hex({data}), 1, 1)) BETWEEN {ord('8')} AND {ord('F')})"
    modulus = f"CAST(pow(2, (octet_length({data}) * 8)) AS DECIMAL(38,0))"
    unscaled = f"CASE WHEN {negative} THEN ({unsigned} - {modulus}) ELSE {unsigned} END"
    divisor = f"CAST(pow(10, {column_type.scale}) AS DECIMAL(38,0))"
    scaled = f"CAST(({unscaled} / {divisor}) AS {target})"
    return (
        f"CASE WHEN {_matches(raw, NUMBER_TEXT)} THEN CAST({raw} AS {target})"
        f" WHEN {_matches(raw, BASE64_TEXT)} AND octet_length({data}) <= 8 THEN {scaled} END"
    )


def typed_value(marked: str, column_type: ColumnType) -> str:
    """The value of ``marked`` (SQL text of the JSON text) in ``column_type``; null when it does
    not convert (SQL text)."""
    target = column_type.spark_type
    inexact = f"startswith({marked}, {literal(INEXACT)})"
    if target.startswith("decimal"):
        # A decimal must be exact: a number Spark's reader rounded to a double cannot be one.
        raw = _when(f"NOT {inexact}", marked)
    else:
        unmarked = f"substring({marked}, {len(INEXACT) + 1}, {1 << 20})"
        raw = f"CASE WHEN {inexact} THEN {unmarked} ELSE {marked} END"
    encoding = column_type.encoding
    base = target.split("(")[0].strip().lower()
    if encoding == "latin1":
        # Canal writes binary values as the ISO-8859-1 decoding of their bytes.
        return f"encode({raw}, 'ISO-8859-1')"
    if base == "binary" or encoding == "base64":
        return _when(_matches(raw, BASE64_TEXT), f"unbase64({raw})")
    if encoding == "connect_decimal":
        return _connect_decimal(raw, column_type)
    if encoding == "epoch_seconds":
        value = _epoch_seconds(raw)
        return value if base == "timestamp" else f"CAST({value} AS {target})"
    if encoding == "datetime":
        return _datetime(raw, target)
    if encoding == "oms_timestamp":
        # seconds[.fraction] since OMS 3.3.0 (integer seconds before); Canal sends date-time text.
        seconds = _epoch_seconds(raw)
        return (
            f"CASE WHEN {_matches(raw, EPOCH_SECONDS_TEXT)} THEN {seconds}"
            f" ELSE {_datetime(raw, target)} END"
        )
    if base == "date" and encoding == "plain":
        return _when(_matches(raw, DATE_TEXT), f"CAST(trim({raw}) AS DATE)")
    if encoding == "epoch_days":
        days = f"date_add(CAST('1970-01-01' AS DATE), CAST({raw} AS INT))"
        return _when(_matches(raw, INTEGER_TEXT), days)
    if encoding in ("epoch_millis", "epoch_micros", "epoch_nanos"):
        number = f"CAST({raw} AS BIGINT)"
        value = {
            "epoch_millis": f"timestamp_millis({number})",
            "epoch_micros": f"timestamp_micros({number})",
            "epoch_nanos": f"timestamp_micros(floor(({number} / 1000)))",
        }[encoding]
        casted = value if base == "timestamp" else f"CAST({value} AS {target})"
        return (
            f"CASE WHEN {_matches(raw, INTEGER_TEXT)} THEN {casted}"
            f" ELSE CAST({raw} AS {target}) END"
        )
    if base in INTEGRAL:
        # Spark's cast truncates "3.5" to 3: only whole numbers may become integers.
        return _when(_matches(raw, INTEGER_TEXT), f"CAST(trim({raw}) AS {target})")
    if base == "boolean":
        words = ", ".join(literal(word) for word in BOOLEAN_TEXT)
        return _when(f"lower(trim({raw})) IN ({words})", f"CAST(trim({raw}) AS BOOLEAN)")
    if base == "decimal":
        fits = f"{_matches(raw, NUMBER_TEXT)} AND {decimal_fits(raw, target)}"
        return _when(fits, f"CAST({raw} AS {target})")
    if base in ("float", "double"):
        # JSON's non-numeric numbers (as Spark's reader accepts them) are doubles too.
        special = f"trim({raw}) IN ('NaN', 'Infinity', '-Infinity', '+Infinity')"
        return _when(
            f"({_matches(raw, NUMBER_TEXT)} OR {special})", f"CAST(trim({raw}) AS {target})"
        )
    if base == "string":
        return raw
    return f"CAST({raw} AS {target})"


def column_error(
    name: str, raw: str, typed: str, column_type: ColumnType, named_by: str | None = None
) -> str:
    """An error text when a present value did not convert, else null (SQL text). ``named_by``:
    a column naming the column per change (see ``typed_changes.raw_value``), instead of ``name``."""
    shown = f"substring(regexp_replace({raw}, {literal(INEXACT)}, ''), 1, 80)"
    problem = f"is not a valid {column_type.spark_type}"
    lost = f"{raw} IS NOT NULL AND {typed} IS NULL"

    def column(text: str) -> str:  # the text's first arguments of concat
        if named_by is None:
            return literal(f"column '{name}'{text}")
        opening, closing = literal("column '"), literal("'" + text)
        return f"{opening}, {named_by}, {closing}"

    value = column(": value '")
    if column_type.spark_type.startswith("decimal"):
        problem = f"does not fit {column_type.spark_type} without rounding"
        inexact = (
            f"') has more digits than Spark's JSON reader keeps for a number, and a "
            f"{column_type.spark_type} must be exact (send DECIMAL values as JSON strings)"
        )
        read_as = column(": the number (read as '")
        why = literal(f"' {problem}")
        return (
            f"CASE WHEN startswith({raw}, {literal(INEXACT)})"
            f" THEN concat({read_as}, {shown}, {literal(inexact)})"
            f" WHEN {lost} THEN concat({value}, {shown}, {why}) END"
        )
    if column_type.encoding in ("datetime", "oms_timestamp", "epoch_seconds"):
        problem += " (unknown zone, or digits beyond microseconds)"
    why = literal(f"' {problem}")
    return _when(lost, f"concat({value}, {shown}, {why})")
