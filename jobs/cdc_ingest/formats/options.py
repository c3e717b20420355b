"""Pipeline keys that only some formats understand, validated when the config is loaded.

A format's options sit next to the common pipeline keys in the YAML (``columns:`` for a DataHub
Tuple topic's schema, ``metadata_key:`` for Aerospike). This module imports no pyspark: Airflow
loads configs at DAG parse time, and a typo must fail there, naming the key, not inside Spark.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from cdc_ingest.config_model import LocatedError

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
    """A format option has the wrong shape (the message says why, not which option)."""


def _columns(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not value:
        raise OptionError("expected a mapping of column name -> DataHub type")
    columns: dict[str, str] = {}
    for name, type_name in value.items():
        text = str(type_name).strip().upper()
        if text not in DATAHUB_TUPLE_TYPES and not _DECIMAL.match(text):
            raise LocatedError(
                f"columns.{name}: unknown DataHub type {type_name!r} "
                f"(known: {', '.join(DATAHUB_TUPLE_TYPES)}, DECIMAL(p,s))"
            )
        columns[str(name)] = text
    return columns


def _identifier_text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise OptionError("expected a non-empty string")
    return value


def _table_name(value: Any) -> str:
    if not isinstance(value, str) or not re.match(r"^[a-z0-9][a-z0-9_]*$", value):
        raise OptionError(f"{value!r} must match [a-z0-9][a-z0-9_]*")
    return value


# Per format: option name -> (parser, default). A format absent here takes no options.
FORMAT_OPTIONS: dict[str, dict[str, tuple[Callable[[Any], Any], Any]]] = {
    "datahub-tuple": {"columns": (_columns, None)},
    "aerospike": {
        "metadata_key": (_identifier_text, "metadata"),
        "no_set_table": (_table_name, "no_set"),
    },
}


def format_options() -> dict[str, tuple[str, ...]]:
    """Every format option, with the formats that take it."""
    taken: dict[str, tuple[str, ...]] = {}
    for fmt, options in FORMAT_OPTIONS.items():
        for name in options:
            taken[name] = (*taken.get(name, ()), fmt)
    return taken


def parse_option(name: str, value: Any) -> Any:
    """One format option's value, validated (None: not given)."""
    if value is None:
        return None
    [parse] = {
        parse
        for options in FORMAT_OPTIONS.values()
        for n, (parse, _) in options.items()
        if n == name
    }
    return parse(value)


def option_values(fmt: str, given: dict[str, Any]) -> dict[str, Any]:
    """A pipeline's options for its format, with the defaults of those not given."""
    return {
        name: default if given.get(name) is None else given[name]
        for name, (_, default) in FORMAT_OPTIONS.get(fmt, {}).items()
    }
