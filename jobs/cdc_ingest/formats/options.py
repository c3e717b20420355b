"""Pipeline keys that only some formats understand, validated when the config is loaded.

A format's options sit next to the common pipeline keys in the YAML (``columns:`` for a DataHub
Tuple topic's schema, ``metadata_key:`` for Aerospike). This module imports no pyspark: Airflow
loads configs at DAG parse time, and a typo must fail there, naming the key, not inside Spark.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

DATAHUB_TUPLE_TYPES = (
    "BIGINT",
    "INTEGER",
    "SMALLINT",
    "TINYINT",
    "DOUBLE",
    "FLOAT",
    "DECIMAL",
    "BOOLEAN",
    "STRING",
    "TIMESTAMP",
)
_DECIMAL = re.compile(r"^DECIMAL\s*\(\s*\d+\s*(,\s*\d+\s*)?\)$")


class OptionError(ValueError):
    """A format option has the wrong shape; the message names the option."""


def _columns(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not value:
        raise OptionError("columns: expected a mapping of column name -> DataHub type")
    columns: dict[str, str] = {}
    for name, type_name in value.items():
        text = str(type_name).strip().upper()
        if text not in DATAHUB_TUPLE_TYPES and not _DECIMAL.match(text):
            raise OptionError(
                f"columns.{name}: unknown DataHub type {type_name!r} "
                f"(known: {', '.join(DATAHUB_TUPLE_TYPES)}, DECIMAL(p,s))"
            )
        columns[str(name)] = text
    return columns


def _identifier_text(option: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise OptionError(f"{option}: expected a non-empty string")
        return value

    return parse


def _table_name(value: Any) -> str:
    if not isinstance(value, str) or not re.match(r"^[a-z0-9][a-z0-9_]*$", value):
        raise OptionError(f"no_set_table: {value!r} must match [a-z0-9][a-z0-9_]*")
    return value


# Per format: option name -> (parser, default). A format absent here takes no options.
FORMAT_OPTIONS: dict[str, dict[str, tuple[Callable[[Any], Any], Any]]] = {
    "datahub-tuple": {"columns": (_columns, None)},
    "aerospike": {
        "metadata_key": (_identifier_text("metadata_key"), "metadata"),
        "no_set_table": (_table_name, "no_set"),
    },
}


def option_names(fmt: str) -> tuple[str, ...]:
    """The options a format accepts."""
    return tuple(FORMAT_OPTIONS.get(fmt, {}))


def parse_options(fmt: str, raw: dict[str, Any]) -> dict[str, Any]:
    """Validate a pipeline's options for its format and fill in defaults.

    Args:
        fmt: the format name.
        raw: the option keys found in the pipeline's mapping.

    Raises:
        OptionError: an option is malformed or the format does not take it.
    """
    known = FORMAT_OPTIONS.get(fmt, {})
    for name in raw:
        if name not in known:
            raise OptionError(f"format {fmt!r} takes no option {name!r}")
    return {
        name: (parse(raw[name]) if raw.get(name) is not None else default)
        for name, (parse, default) in known.items()
    }
