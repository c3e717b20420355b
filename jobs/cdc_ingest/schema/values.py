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


# Hex digits and their complements: a negative two's-complement number's magnitude is the
# complement of its bits, plus one.
_HEX, _COMPLEMENT = "0123456789ABCDEF", "FEDCBA9876543210"
# Unscaled values of up to 16 bytes (Iceberg's 38 digits need 16): two halves of 8 bytes each,
# which ``conv`` reads as unsigned 64-bit numbers.
MAX_UNSCALED_BYTES = 16


def _bind(value: str, name: str, body: str) -> str:
    """SQL text: ``body`` with ``name`` standing for ``value``, evaluated once. A lambda keeps
    the text of an expression that uses a value many times linear in size: written inline, each
    use repeats the value's whole text, and nested uses multiply (Spark then fails to compile)."""
    return f"element_at(transform(array({value}), {name} -> {body}), 1)"


def _unsigned_hex(h: str) -> str:
    """SQL text: the unsigned number of up to 32 hex digits ``h`` (a name), as
    ``DECIMAL(38,0)`` (null above 38 digits)."""
    low = f"CAST(conv(right({h}, 16), 16, 10) AS DECIMAL(38,0))"
    high_digits = f"substring({h}, 1, greatest(length({h}) - 16, 0))"
    high = f"CAST(coalesce(conv(nullif({high_digits}, ''), 16, 10), '0') AS DECIMAL(38,0))"
    return f"({high} * CAST(18446744073709551616 AS DECIMAL(38,0)) + {low})"


def _connect_unscaled(data: str) -> str:
    """SQL text: Kafka Connect's big-endian two's-complement bytes (``data``, any expression) as
    a ``DECIMAL(38,0)``, or null beyond 16 bytes or 38 digits."""
    negative = f"(ascii(substring(_h, 1, 1)) BETWEEN {ord('8')} AND {ord('F')})"
    complement = f"translate(_h, {literal(_HEX)}, {literal(_COMPLEMENT)})"
    magnitude = _bind(complement, "_c", f"({_unsigned_hex('_c')} + CAST(1 AS DECIMAL(38,0)))")
    # A subtraction, not a minus sign: Spark 4.1 rounds away the low digits of a 38-digit decimal
    # that it negates (unary minus, negative(), abs()).
    value = (
        f"CASE WHEN {negative} THEN CAST(0 AS DECIMAL(38,0)) - {magnitude}"
        f" ELSE {_unsigned_hex('_h')} END"
    )
    sized = f"CASE WHEN length(_h) BETWEEN 2 AND {2 * MAX_UNSCALED_BYTES} THEN {value} END"
    return _bind(f"hex({data})", "_h", sized)


def _scaled_text(unscaled: str, scale: str) -> str:
    """SQL text: the decimal text of ``unscaled`` (a ``DECIMAL(38,0)`` expression) over
    10^``scale`` (an int expression of names only), digit for digit so that nothing rounds."""
    padded = f"lpad(_s, greatest(length(_s), {scale} + 1), '0')"
    whole = f"substring(_p, 1, length(_p) - {scale})"
    fraction = f"substring(_p, length(_p) - {scale} + 1, {scale})"
    point = _bind(padded, "_p", f"concat({whole}, '.', {fraction})")
    digits = _bind("TRIM(LEADING '-' FROM CAST(_u AS STRING))", "_s", point)
    sign = "CASE WHEN _u < 0 THEN '-' ELSE '' END"
    text = (
        f"CASE WHEN {scale} = 0 THEN CAST(_u AS STRING)"
        f" WHEN {scale} < 0 AND _u <> 0 THEN concat(CAST(_u AS STRING), repeat('0', -{scale}))"
        f" WHEN {scale} < 0 THEN '0' ELSE concat({sign}, {digits}) END"
    )
    return _bind(unscaled, "_u", text)


def decimal_text(raw: str, column_type: ColumnType) -> str:
    """SQL text: the exact decimal text of a Connect ``Decimal`` (Base64 unscaled bytes, the
    column type's scale) or of Debezium's ``VariableScaleDecimal`` (``{"scale","value"}``), or
    the value itself when a converter sent a plain number; null when it is neither."""
    if column_type.encoding == "variable_decimal":
        parts = literal(VARIABLE_DECIMAL_TEXT)
        scale = f"CAST(regexp_extract(_r, {parts}, 1) AS INT)"
        data = f"unbase64(regexp_extract(_r, {parts}, 2))"
        scaled = _bind(scale, "_k", _scaled_text(_connect_unscaled(data), "_k"))
        encoded = _matches("_r", VARIABLE_DECIMAL_TEXT)
    else:
        scaled = _scaled_text(_connect_unscaled("unbase64(_r)"), str(column_type.scale))
        encoded = _matches("_r", BASE64_TEXT)
    body = f"CASE WHEN {_matches('_r', NUMBER_TEXT)} THEN trim(_r) WHEN {encoded} THEN {scaled} END"
    return _bind(raw, "_r", body)


def _connect_decimal(raw: str, column_type: ColumnType) -> str:
    """Kafka Connect Decimal (Base64 of the big-endian two's-complement unscaled value) or
    Debezium's VariableScaleDecimal, exactly, or null when the column's type cannot hold it.

    Converters configured with ``decimal.handling.mode=string|double`` send plain numbers instead,
    which are cast the same way. A Connect Decimal of at most 8 bytes whose scale the column
    keeps, up to 6, takes the short way (every DECIMAL up to 18 digits), without lambdas.
    """
    target = column_type.spark_type
    exact = _bind(
        decimal_text(raw, column_type),
        "_t",
        _when(decimal_fits("_t", target), f"CAST(_t AS {target})"),
    )
    if not target.startswith("decimal"):
        return decimal_text(raw, column_type)
    # Spark's division keeps 6 fraction digits at least, not always more.
    short = column_type.scale <= min(6, _decimal_bounds(target)[1])
    if column_type.encoding != "connect_decimal" or not short:
        return exact
    data = f"unbase64({raw})"
    unsigned = f"CAST(conv(hex({data}), 16, 10) AS DECIMAL(38,0))"
    negative = f"(ascii(substring(hex({data}), 1, 1)) BETWEEN {ord('8')} AND {ord('F')})"
    modulus = f"CAST(pow(2, (octet_length({data}) * 8)) AS DECIMAL(38,0))"
    unscaled = f"CASE WHEN {negative} THEN ({unsigned} - {modulus}) ELSE {unsigned} END"
    divisor = f"CAST(pow(10, {column_type.scale}) AS DECIMAL(38,0))"
    scaled = f"CAST(({unscaled} / {divisor}) AS {target})"
    return (
        f"CASE WHEN {_matches(raw, NUMBER_TEXT)} THEN CAST({raw} AS {target})"
        f" WHEN {_matches(raw, BASE64_TEXT)} AND octet_length({data}) <= 8 THEN {scaled}"
        f" ELSE {exact} END"
    )


# Debezium's VariableScaleDecimal (PostgreSQL numeric without scale, Oracle NUMBER without one)
# as the image's text holds the struct: {"scale":2,"value":"AXDsL1/jGQ=="}.
VARIABLE_DECIMAL_TEXT = r'^\{"scale":(-?[0-9]+),"value":"([A-Za-z0-9+/]*={0,2})"\}$'
# Debezium's times of day (Time: ms in an int32, MicroTime: µs, NanoTime: ns, in an int64) and
# the unit each counts in, in microseconds.
TIME_UNITS = {"time_millis": 1000, "time_micros": 1, "time_nanos": None}


def _time_text(raw: str, encoding: str) -> str:
    """SQL text: a Debezium time of day (a count since midnight) as ``HH:mm:ss[.ffffff]``, the
    fraction without trailing zeros, as PostgreSQL writes a time. Hours may pass 23 and the
    value may be negative (MySQL TIME is a duration). Text that is already a time stays."""
    unit = TIME_UNITS[encoding]
    micros = f"(_n * {unit})" if unit else "floor(_n / 1000)"
    lost_nanos = "(_n % 1000 <> 0)" if unit is None else "false"

    def two(value: str) -> str:
        return f"lpad(CAST({value} AS STRING), greatest(2, length(CAST({value} AS STRING))), '0')"

    hours = two("(_a div 3600000000)")
    minutes = two("((_a div 60000000) % 60)")
    seconds = two("((_a div 1000000) % 60)")
    fraction = "regexp_replace(lpad(CAST((_a % 1000000) AS STRING), 6, '0'), '0+$', '')"
    text = (
        f"concat(CASE WHEN _a <> _m THEN '-' ELSE '' END, {hours}, ':', {minutes}, ':',"
        f" {seconds}, CASE WHEN _a % 1000000 <> 0 THEN concat('.', {fraction}) ELSE '' END)"
    )
    from_micros = _bind(micros, "_m", _bind("abs(_m)", "_a", text))
    counted = _bind("CAST(trim(_r) AS BIGINT)", "_n", _when(f"NOT {lost_nanos}", from_micros))
    body = (
        f"CASE WHEN {_matches('_r', INTEGER_TEXT)} THEN {counted}"
        f" WHEN {_matches('_r', TIME_TEXT)} THEN trim(_r) END"
    )
    return _bind(raw, "_r", body)


TIME_TEXT = r"^\s*-?[0-9]{2,3}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?\s*$"


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
    if encoding in ("connect_decimal", "variable_decimal"):
        return _connect_decimal(raw, column_type)
    if encoding in TIME_UNITS:
        return _time_text(raw, encoding)
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
    base = column_type.spark_type.split("(")[0].strip().lower()
    if base not in YEAR_BOUNDS:
        return _when(lost, f"concat({value}, {shown}, {why})")
    low, high = (f"CAST({literal(bound)} AS {base})" for bound in YEAR_BOUNDS[base])
    outside = literal(f"' {OUTSIDE_YEARS}")
    return (
        f"CASE WHEN {lost} THEN concat({value}, {shown}, {why})"
        f" WHEN {typed} < {low} OR {typed} > {high} THEN concat({value}, {shown}, {outside}) END"
    )


def typed_entry(raw: str, column_type: ColumnType, named_by: str) -> str:
    """SQL text: the struct of ``raw``'s value in ``column_type`` (``value``) and its error
    (``error``, as ``column_error`` gives it for the column ``named_by`` names), where ``raw``
    and ``named_by`` are the variables of a lambda that types many columns of one type."""
    error = column_error("", raw, "_tv", column_type, named_by)
    return _bind(
        typed_value(raw, column_type), "_tv", f"named_struct('value', _tv, 'error', {error})"
    )


# Dates and timestamps a mirror holds: Spark's reach further, but Python's datetime (pyiceberg's
# file statistics, pandas, Airflow) and most readers end at years 1 and 9999, so every write route
# dead-letters a value outside them rather than store what those cannot read.
YEAR_BOUNDS = {
    "date": ("0001-01-01", "9999-12-31"),
    "timestamp": ("0001-01-01 00:00:00", "9999-12-31 23:59:59.999999"),
    "timestamp_ntz": ("0001-01-01 00:00:00", "9999-12-31 23:59:59.999999"),
}
OUTSIDE_YEARS = "is outside the years 1 to 9999 that a mirror's dates and timestamps hold"
