"""What the pipelines file's sections have in common as pydantic models: one configuration, the
text forms of durations and choices, and one error line per invalid file.

Each section is a pydantic dataclass beside the code that uses it (``MaintenanceConfig`` in
:mod:`cdc_ingest.maintenance_config`, ``CatalogConfig`` in :mod:`cdc_ingest.catalog.config`, ...):
its fields are the section's keys with their defaults, its validators raise ``ValueError`` with a
message that does not repeat the key, and :func:`error_line` puts the key's path in front. No
pyspark here: Airflow loads the file when it parses the DAGs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Annotated, Any, TypeVar

from pydantic import (
    BeforeValidator,
    ConfigDict,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
)
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import ErrorDetails, core_schema

# Unknown keys are errors; numbers YAML reads where a name is expected (``name: 2024``) are text.
SECTION = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

DURATION = re.compile(r"^(\d+)\s*([smhd])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
# The spellings of "nothing" a schedule or a retention takes.
NONE = (None, "", "none", "None")

T = TypeVar("T")


class ConfigError(ValueError):
    """The pipelines file is missing, malformed, or names something that does not exist."""


class LocatedError(ValueError):
    """A validator's error whose message starts with its own key's path (a mapping's entries
    validated one by one): shown in place of the key it was raised for."""


def parse_duration(value: Any) -> timedelta:
    """``30s``, ``15m``, ``12h`` or ``7d`` as a timedelta (a timedelta as it is)."""
    if isinstance(value, timedelta):
        return value
    match = DURATION.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{value!r} is not a duration like 30s, 15m, 12h or 7d")
    return timedelta(**{UNITS[match.group(2)]: int(match.group(1))})


def format_duration(duration: timedelta) -> str:
    """A duration in the largest unit that divides it exactly: ``7d``, ``36h``, ``90s``."""
    seconds = int(duration.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


DURATION_SCHEMA = {"type": "string", "pattern": DURATION.pattern, "examples": ["15m", "7d"]}
Duration = Annotated[timedelta, BeforeValidator(parse_duration), WithJsonSchema(DURATION_SCHEMA)]


def _none_or_duration(value: Any) -> timedelta | None:
    return None if value in NONE else parse_duration(value)


# A duration, or none (also spelled "none").
OptionalDuration = Annotated[
    timedelta | None,
    BeforeValidator(_none_or_duration),
    WithJsonSchema({"anyOf": [DURATION_SCHEMA, {"enum": ["none"]}, {"type": "null"}]}),
]


@dataclasses.dataclass(frozen=True)
class OneOf:
    """``Annotated[str, OneOf(...)]``: a text field that must be one of the choices, refused in
    the file's own words (``'keep' must be one of apply, ignore, soft``)."""

    choices: tuple[str, ...]

    def check(self, value: Any) -> Any:
        if value not in self.choices:
            raise ValueError(f"{value!r} must be one of {', '.join(self.choices)}")
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        return {"enum": list(self.choices)}


def _none_or_text(value: Any) -> str | None:
    return None if value in NONE else str(value)


# A schedule (cron or preset), or none: only when triggered.
Schedule = Annotated[
    str | None,
    BeforeValidator(_none_or_text),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "null"}]}),
]


def regular_expression(pattern: Any, what: str = "a regular expression (a string)") -> str:
    """A regular expression, compiled to check it; ``what`` says what an empty one should be."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"must be {what}")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
    return pattern


def connection_id(value: Any) -> str | None:
    """An Airflow connection id, or None when not given."""
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise ValueError("must be an Airflow connection id (a string)")
    return value


ConnectionId = Annotated[str | None, BeforeValidator(connection_id)]


class FileSchema(GenerateJsonSchema):
    """JSON Schema with the defaults spelled as the file spells them (``7d``, not ``P7D``)."""

    def encode_default(self, dft: Any) -> Any:
        if isinstance(dft, timedelta):
            return format_duration(dft)
        return super().encode_default(dft)


def json_schema(kind: Any) -> dict[str, Any]:
    """The JSON Schema of a section (or of the whole file)."""
    return TypeAdapter(kind).json_schema(schema_generator=FileSchema)


def validated(kind: type[T], raw: Any, where: str) -> T:
    """``raw`` as the section ``kind``, or a ConfigError with one line naming the key."""
    try:
        return TypeAdapter(kind).validate_python(raw)
    except ValidationError as exc:
        raise ConfigError(error_line(exc, json_schema(kind), where)) from None


def error_line(exc: ValidationError, schema: dict[str, Any], where: str, names: Any = None) -> str:
    """The first of pydantic's errors as one line: where it is in the file, then what is wrong.

    Args:
        exc: pydantic's errors.
        schema: the JSON Schema of the validated type (to list a mapping's keys).
        where: what the path starts with (the file, or a section's name).
        names: the file's raw ``pipelines`` list, to name a pipeline by its ``name``.
    """
    error = exc.errors()[0]
    loc = list(error["loc"])
    if error["type"] in ("unexpected_keyword_argument", "extra_forbidden", "missing"):
        key = loc.pop()
        if error["type"] == "missing":
            message = f"missing required key {key!r}"
        else:
            message = f"unknown key {key!r} (keys: {', '.join(_keys_at(schema, loc))})"
    else:
        message = _message(error)
        if isinstance(error.get("ctx", {}).get("error"), LocatedError):
            loc.pop()
    located = _located(where, loc, names)
    return f"{located}: {message}" if located else message


# What a value of the wrong type should have been, by pydantic's error type.
_EXPECTED = {
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "string_type": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "dataclass_type": "a mapping",
    "dataclass_exact_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _message(error: ErrorDetails) -> str:
    if error["type"] == "value_error":
        return str(error.get("ctx", {}).get("error", error["msg"]))
    expected = _EXPECTED.get(error["type"])
    if expected is not None:
        return f"expected {expected}, got {error['input']!r}"
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, got {error['input']!r}"


def _located(where: str, loc: Sequence[int | str], names: Any) -> str:
    parts = [str(p) for p in loc]
    if names is not None and len(parts) >= 2 and parts[0] == "pipelines":
        index = int(parts[1])
        entry = names[index] if index < len(names) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        pipeline = f"pipeline {name!r}" if isinstance(name, str) else f"pipelines[{index}]"
        parts = [f"{pipeline}: {'.'.join(parts[2:])}" if parts[2:] else pipeline]
    return ".".join([where, *parts] if where else parts)


def _keys_at(schema: dict[str, Any], loc: Sequence[int | str]) -> list[str]:
    """The keys the mapping at ``loc`` takes, from the validated type's JSON Schema."""
    node = _resolve(schema, schema)
    for part in loc:
        if "properties" in node and part in node["properties"]:
            node = _resolve(node["properties"][part], schema)
        elif "items" in node:
            node = _resolve(node["items"], schema)
        elif isinstance(node.get("additionalProperties"), dict):
            node = _resolve(node["additionalProperties"], schema)
        else:
            return []
    return list(node.get("properties", {}))


def _resolve(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A schema node with its reference followed, and the one mapping of an either-or."""
    while True:
        if "$ref" in node:
            node = schema["$defs"][node["$ref"].split("/")[-1]]
        elif "anyOf" in node:
            mappings = [o for o in node["anyOf"] if "$ref" in o or "properties" in o]
            if not mappings:
                return node
            node = mappings[0]
        else:
            return node
