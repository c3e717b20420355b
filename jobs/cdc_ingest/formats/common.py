"""Column expressions every decoder needs: numbers for ordering, parse errors, op tables."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import JSON_MAX_STRING_LENGTH as MAX_STRING_LENGTH

# PERMISSIVE keeps a line Spark cannot read as the schema, with its text in ``_corrupt``.
JSON_OPTIONS = {
    "columnNameOfCorruptRecord": "_corrupt",
    "mode": "PERMISSIVE",
    "maxStringLen": MAX_STRING_LENGTH,
}
# For parses that need no corrupt-record column (a map of a message's fields).
PLAIN_JSON_OPTIONS = {"maxStringLen": MAX_STRING_LENGTH}
TRAILING_COMMA = r",\s*[}\]]"
LONG_NUMBER = r"[:\[,]\s*-?[0-9][0-9.eE+-]{1000,}"


# Alibaba DataWorks (OMS DataWorks 2.0, DataHub Blob) operations that change no row, and its DDL.
DATAWORKS_CONTROL_OPS = (
    "TRANSACTION_BEGIN",
    "TRANSACTION_END",
    "GTID",
    "XACOMMIT",
    "XAROLLBACK",
    "QUERY",
    "CINDEX",
    "DINDEX",
)
DATAWORKS_DDL_OPS = ("CREATE", "ALTER", "ERASE", "TRUNCATE", "RENAME")


def number(column: Column) -> Column:
    """A long, or -1 where absent, so that ordering arrays never hold nulls."""
    return F.coalesce(column.cast("bigint"), F.lit(-1).cast("bigint"))


def parse_error(value: Column, fmt: str, expected: str) -> Column:
    """Why a line that Spark could not read as the format's message is unusable."""
    not_json = (
        F.when(
            value.rlike(TRAILING_COMMA),
            F.lit("line is not valid JSON: a trailing comma before '}' or ']'"),
        )
        .when(
            value.rlike(LONG_NUMBER),
            F.lit(
                "line holds a number literal longer than 1000 characters, more than Spark's "
                "JSON reader (Jackson) accepts"
            ),
        )
        .otherwise(F.lit("line is not valid JSON"))
    )
    article = "an" if fmt[0] in "aeiou" else "a"
    return F.when(F.get_json_object(value, "$").isNull(), not_json).otherwise(
        F.lit(f"not {article} {fmt} message: expected {expected}")
    )


def lookup(mapping: dict[str, str], key: Column) -> Column:
    """``mapping[key]`` as a Spark expression (null for keys not in it)."""
    return F.element_at(F.create_map(*[F.lit(x) for kv in mapping.items() for x in kv]), key)


def non_empty(names: Column) -> Column:
    """An array of names, or null when it is null or empty (so configured keys are asked for)."""
    return F.when(F.size(F.coalesce(names, F.array())) > 0, names)


def epoch_millis(seconds_or_millis: Column) -> Column:
    """Epoch milliseconds from a number that is seconds (10 digits) or already milliseconds."""
    value = seconds_or_millis.cast("double")
    return F.when(value < 1e11, value * 1000).otherwise(value).cast("bigint")


# Spark's JSON reader renders a JSON number read into a string field as a Java double: digits
# beyond a double's precision are gone ("12345678.123456789012345678" becomes
# "1.234567812345679E7"). A value rendered so, whose text is not in the message as written, is
# marked INEXACT: a double column takes it as it is, a decimal column dead-letters it.
INEXACT = "\u0001inexact:"
_DOUBLE_RENDERING = r"^-?[0-9]+\.[0-9]+(E-?[0-9]+)?$"


# How Spark renders the non-numeric number tokens (NaN, Infinity, -Infinity) it reads into a
# string value: quoted, as Jackson writes them.
QUOTED_NON_NUMERIC = ('"NaN"', '"Infinity"', '"-Infinity"')


def mark_inexact_numbers(image: Column, message: Column) -> Column:
    """``image`` with each number Spark could not keep digit for digit prefixed by ``INEXACT``,
    and the non-numeric number tokens (``NaN``, ``Infinity``) as the text a double cast reads."""

    def mark(_: Column, v: Column) -> Column:
        suspect = ((F.length(v) >= 16) | v.contains("E")) & v.rlike(_DOUBLE_RENDERING)
        at = F.call_function("instr", message, v)
        after = message.substr(at + F.length(v), F.lit(1))
        verbatim = (at > 0) & ~after.rlike("[0-9eE]")
        return (
            F.when(suspect & ~verbatim, F.concat(F.lit(INEXACT), v))
            .when(v.isin(*QUOTED_NON_NUMERIC), F.regexp_replace(v, '"', ""))
            .otherwise(v)
        )

    return F.transform_values(image, mark)
