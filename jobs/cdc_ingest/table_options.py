"""How each mirrored table is shaped: the pipeline's ``table_options``, ``deletes`` and
``type_mapping``, validated when the config is loaded.

``table_options`` maps ``"*"`` (every table of the pipeline) and target table names to
``partition_by`` (Iceberg transforms, as Iceberg's Spark DDL spells them), ``sort_by`` (the write
order), ``properties`` (Iceberg table properties), ``computed_columns`` (a name and a Spark SQL
expression over the row's source columns), ``deletes``, ``type_mapping``, the history keys
(``history``, ``history_columns``, ``history_except_columns``, ``history_table``),
``schema_changes`` (``schema_policy``) and ``expectations`` (named checks of the row images,
``apply/expectations``). A table's options are the pipeline's
``deletes``/``type_mapping``/``schema_changes``, then ``"*"``, then its own entry: a later layer
replaces a list or a value and adds to a mapping (a string form of ``schema_changes`` sets every
kind). This module imports no pyspark: Airflow loads
configs at DAG parse time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any

import pydantic
from pydantic import BeforeValidator, WithJsonSchema

from cdc_ingest.config_model import SECTION, ConfigError, LocatedError, OneOf, validated
from cdc_ingest.iceberg_properties import PropertyError, validate_property
from cdc_ingest.schema_policy import (
    ACTIONS,
    KINDS,
    STRING_FORMS,
    SchemaPolicy,
    SchemaPolicyError,
    parse_schema_changes,
    schema_policy,
)

EVERY_TABLE = "*"
DELETE_MODES = ("apply", "ignore", "soft")
TYPE_MAPPINGS = ("default", "to-string")
# Keys a pipeline gives for every table of its own, outside table_options.
PIPELINE_WIDE = ("deletes", "type_mapping", "schema_changes")
HISTORY_MODES = ("none", "scd2")
# Where a table's history is kept: a table of the same namespace named from the mirror's.
HISTORY_TABLE_DEFAULT = "{table}_history"
# A layer that names one of these replaces the other (a table's own list wins over "*"'s).
_TRACKING = ("history_columns", "history_except_columns")
# What a change that fails an expectation does: applied and counted, dead-lettered, or its
# table's batch stopped.
ON_VIOLATION = ("warn", "drop", "fail")
# The column of a soft-deleted row (``deletes: soft``).
DELETED_COLUMN = "_cdc_deleted"

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_TRANSFORM = re.compile(
    rf"^\s*(?:(?P<plain>{_NAME})"
    rf"|(?P<unary>identity|years|months|days|hours|year|month|day|hour)\s*\(\s*(?P<ucol>{_NAME})\s*\)"
    rf"|(?P<binary>bucket|truncate)\s*\(\s*(?P<n>\d+)\s*,\s*(?P<bcol>{_NAME})\s*\))\s*$",
    re.IGNORECASE,
)
_SORT = re.compile(
    rf"^\s*(?P<col>{_NAME})(?:\s+(?P<dir>asc|desc))?(?:\s+nulls\s+(?P<nulls>first|last))?\s*$",
    re.IGNORECASE,
)
# Iceberg's singular spellings of the time transforms, as its Spark DDL also accepts them.
_PLURAL = {"year": "years", "month": "months", "day": "days", "hour": "hours"}


class TableOptionsError(ValueError):
    """A table option has the wrong shape or names something Iceberg does not know."""


class TableDesignError(ValueError):
    """A table's options do not fit its columns (found when the table is created or changed)."""


@dataclass(frozen=True)
class PartitionField:
    """One Iceberg partition transform of a source or computed column."""

    transform: str  # identity, bucket, truncate, years, months, days, hours
    column: str
    width: int | None = None  # bucket count or truncate width

    @property
    def text(self) -> str:
        """How Iceberg's Spark DDL spells it: ``bucket(16, id)``, ``days(ts)``, ``region``."""
        if self.transform == "identity":
            return self.column
        if self.width is not None:
            return f"{self.transform}({self.width}, {self.column})"
        return f"{self.transform}({self.column})"

    def sql(self) -> str:
        """:attr:`text` with the column quoted."""
        column = "`" + self.column.replace("`", "``") + "`"
        if self.transform == "identity":
            return column
        if self.width is not None:
            return f"{self.transform}({self.width}, {column})"
        return f"{self.transform}({column})"


@dataclass(frozen=True)
class SortField:
    """One column of the table's write order."""

    column: str
    descending: bool = False
    nulls_first: bool | None = None  # None: Iceberg's default (first when ascending)

    @property
    def text(self) -> str:
        """``col ASC NULLS FIRST``, with the nulls placement always spelled out."""
        nulls_first = (not self.descending) if self.nulls_first is None else self.nulls_first
        return (
            f"{self.column} {'DESC' if self.descending else 'ASC'} "
            f"NULLS {'FIRST' if nulls_first else 'LAST'}"
        )

    def sql(self) -> str:
        """:attr:`text` with the column quoted."""
        column = "`" + self.column.replace("`", "``") + "`"
        return column + self.text[len(self.column) :]


@dataclass(frozen=True)
class Expectation:
    """A named check of each inserted or updated row image: a Spark SQL boolean expression over
    the table's columns (computed ones included). A row is in violation where it is false; null
    passes, as in a SQL CHECK constraint."""

    name: str
    check: str
    on_violation: str = "warn"

    @property
    def text(self) -> str:
        """How a reason names it: ``expectation positive_qty (qty > 0)``."""
        return f"expectation {self.name} ({self.check})"


@dataclass(frozen=True)
class HistoryOptions:
    """A table's SCD type 2 history (``history: scd2``).

    Attributes:
        table: the history table's name, in the mirror's namespace.
        columns: the tracked columns (``history_columns``), or None for every column but
            ``except_columns`` (``history_except_columns``): only a change to a tracked column
            opens a version; others update the version they fall in.
    """

    table: str
    columns: tuple[str, ...] | None = None
    except_columns: tuple[str, ...] = ()

    def tracked(self, columns: list[str]) -> list[str]:
        """Which of a table's ``columns`` open a version when they change."""
        if self.columns is not None:
            chosen = {c.lower() for c in self.columns}
            return [c for c in columns if c.lower() in chosen]
        left_out = {c.lower() for c in self.except_columns}
        return [c for c in columns if c.lower() not in left_out]


@dataclass(frozen=True)
class PipelineTableOptions:
    """A pipeline's validated option layers: pipeline-wide, ``"*"`` and per table."""

    layers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_table(self, name: str) -> TableOptions:
        """The options of target table ``name``."""
        merged: dict[str, Any] = {}
        for layer in ("", EVERY_TABLE, name):
            for key in _TRACKING:
                if key in self.layers.get(layer, {}):
                    for other in _TRACKING:
                        merged.pop(other, None)
            for key, value in self.layers.get(layer, {}).items():
                if isinstance(value, dict):
                    merged[key] = {**merged.get(key, {}), **value}
                else:
                    merged[key] = value
        return TableOptions(**merged)

    def history_tables(self, names: list[str]) -> dict[str, str]:
        """Each of the tables ``names`` that keeps history, with its history table's name."""
        kept = {n: self.for_table(n).history_of(n) for n in names}
        return {n: h.table for n, h in kept.items() if h is not None}

    def history_owner(self, name: str) -> str | None:
        """The table whose history table ``name`` is, if any (names compared without case, as
        the catalogs compare them): such a name cannot be a mirror as well."""
        templates = {HISTORY_TABLE_DEFAULT}
        templates |= {o["history_table"] for o in self.layers.values() if "history_table" in o}
        for template in sorted(templates):
            match = _template_pattern(template).fullmatch(name)
            if match is None:
                continue
            owner = match["table"]
            kept = self.for_table(owner).history_of(owner)
            if kept is not None and kept.table.lower() == name.lower():
                return owner
        return None

    @property
    def soft_deletes_anywhere(self) -> bool:
        """Whether any table of the pipeline may keep deleted rows."""
        return any(layer.get("deletes") == "soft" for layer in self.layers.values())


def parse_partition_field(text: Any) -> PartitionField:
    """``bucket(16, id)``, ``truncate(4, name)``, ``days(ts)``, ``identity(region)``, ``region``."""
    match = _TRANSFORM.match(str(text)) if isinstance(text, str) else None
    if match is None:
        raise TableOptionsError(
            f"{text!r} is not an Iceberg transform (a column, identity(col), "
            "bucket(N, col), truncate(W, col), years(col), months(col), days(col), hours(col))"
        )
    if match["plain"]:
        return PartitionField("identity", match["plain"])
    if match["unary"]:
        transform = match["unary"].lower()
        return PartitionField(_PLURAL.get(transform, transform), match["ucol"])
    width = int(match["n"])
    if width < 1:
        raise TableOptionsError(f"{text!r}: the width must be at least 1")
    return PartitionField(match["binary"].lower(), match["bcol"], width)


def parse_sort_field(text: Any) -> SortField:
    """``col``, ``col DESC``, ``col ASC NULLS LAST``."""
    match = _SORT.match(text) if isinstance(text, str) else None
    if match is None:
        raise TableOptionsError(
            f"{text!r} is not a sort field (column [ASC|DESC] [NULLS FIRST|LAST])"
        )
    nulls = match["nulls"]
    return SortField(
        match["col"],
        descending=(match["dir"] or "asc").lower() == "desc",
        nulls_first=None if nulls is None else nulls.lower() == "first",
    )


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple):
        return list(value)
    if not isinstance(value, list):
        raise TableOptionsError("expected a list")
    return value


def _partition_by(value: Any) -> tuple[PartitionField, ...]:
    fields = tuple(
        f if isinstance(f, PartitionField) else parse_partition_field(f) for f in _as_list(value)
    )
    if len(set(fields)) != len(fields):
        raise TableOptionsError(f"a transform is repeated: {[f.column for f in fields]}")
    return fields


def _sort_by(value: Any) -> tuple[SortField, ...]:
    return tuple(f if isinstance(f, SortField) else parse_sort_field(f) for f in _as_list(value))


def _properties(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise TableOptionsError("expected a mapping of name -> value")
    checked = {}
    for key, text in value.items():
        try:
            checked[str(key)] = validate_property(str(key), text)
        except PropertyError as exc:
            raise TableOptionsError(f"{key}: {exc}") from None
    return checked


def _schema_changes(value: Any) -> dict[str, str]:
    if value == {}:
        return {}  # a pipeline's own, when it gives none
    try:
        return parse_schema_changes(value)
    except SchemaPolicyError as exc:
        raise TableOptionsError(str(exc)) from None


def _column_names(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = _as_list(value)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise TableOptionsError("expected a list of column names")
    return tuple(n.strip() for n in names)


def _history_table(value: Any) -> str:
    example = HISTORY_TABLE_DEFAULT.format(table="orders")
    if not isinstance(value, str) or "{table}" not in value:
        raise TableOptionsError(
            f"expected a name containing {{table}}, e.g. {HISTORY_TABLE_DEFAULT!r}"
        )
    try:
        name = value.format(table="orders")
    except (KeyError, IndexError, ValueError):
        raise TableOptionsError(f"{value!r} may hold only {{table}} in braces") from None
    if name == "orders" or not name.strip() or "." in name or name.startswith("_cdc_"):
        raise TableOptionsError(
            f"{value!r} must name another table of the namespace "
            f"(not starting with _cdc_), e.g. {HISTORY_TABLE_DEFAULT!r} for {example!r}"
        )
    return value


def _template_pattern(template: str) -> re.Pattern[str]:
    """A ``history_table`` template as a pattern of the names it makes (``table``: the mirror)."""
    literal = [re.escape(part) for part in template.split("{table}")]
    return re.compile(
        literal[0] + "(?P<table>.+)" + literal[1] + "".join("(?P=table)" + p for p in literal[2:]),
        re.IGNORECASE,
    )


def _expectations(value: Any) -> dict[str, Expectation]:
    if not isinstance(value, dict) or not value:
        raise TableOptionsError(
            "expected a mapping of rule name -> {check: <Spark SQL boolean "
            "expression>, on_violation: warn | drop | fail}"
        )
    rules: dict[str, Expectation] = {}
    for name, rule in value.items():
        where = str(name)
        if isinstance(rule, Expectation):
            rules[where] = rule
            continue
        if not re.fullmatch(_NAME, str(name)):
            raise TableOptionsError(f"{where}: a rule name is letters, digits and _")
        if isinstance(rule, str):
            rule = {"check": rule}
        if not isinstance(rule, dict) or set(rule) - {"check", "on_violation"}:
            raise TableOptionsError(f"{where}: expected {{check: ..., on_violation: ...}}")
        check = rule.get("check")
        if not isinstance(check, str) or not check.strip():
            raise TableOptionsError(f"{where}.check: expected a Spark SQL boolean expression")
        action = rule.get("on_violation", "warn")
        if action not in ON_VIOLATION:
            raise TableOptionsError(
                f"{where}.on_violation: {action!r} must be one of {', '.join(ON_VIOLATION)}"
            )
        rules[str(name)] = Expectation(str(name), " ".join(check.split()), action)
    return rules


def _computed(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not value:
        raise TableOptionsError("expected a mapping of column name -> Spark SQL expression")
    computed: dict[str, str] = {}
    for name, expression in value.items():
        if not re.fullmatch(_NAME, str(name)) or str(name).lower().startswith("_cdc_"):
            raise TableOptionsError(
                f"{name}: a column name is letters, digits and _ (not starting with _cdc_)"
            )
        if not isinstance(expression, str) or not expression.strip():
            raise TableOptionsError(f"{name}: expected a Spark SQL expression")
        computed[str(name)] = expression.strip()
    return computed


_TRANSFORMS = {"type": "array", "items": {"type": "string", "examples": ["bucket(16, id)"]}}
_SORTS = {"type": "array", "items": {"type": "string", "examples": ["id DESC NULLS LAST"]}}
_NAMES = {"type": "array", "items": {"type": "string"}}
_RULE = {
    "anyOf": [
        {"type": "string"},
        {
            "type": "object",
            "properties": {"check": {"type": "string"}, "on_violation": {"enum": ON_VIOLATION}},
            "required": ["check"],
            "additionalProperties": False,
        },
    ]
}
_SCHEMA_CHANGES = {
    "anyOf": [
        {"enum": list(STRING_FORMS)},
        {
            "type": "object",
            "properties": {kind: {"enum": list(ACTIONS)} for kind in KINDS},
            "additionalProperties": False,
        },
    ]
}


@pydantic.dataclasses.dataclass(frozen=True, config=SECTION)
class TableOptions:
    """Everything that shapes one mirrored table: an entry of ``table_options`` (its keys and
    their defaults, what every table gets unless told otherwise)."""

    partition_by: Annotated[
        tuple[PartitionField, ...], BeforeValidator(_partition_by), WithJsonSchema(_TRANSFORMS)
    ] = ()
    sort_by: Annotated[
        tuple[SortField, ...], BeforeValidator(_sort_by), WithJsonSchema(_SORTS)
    ] = ()
    properties: Annotated[dict[str, str], BeforeValidator(_properties)] = field(
        default_factory=dict
    )
    computed_columns: Annotated[dict[str, str], BeforeValidator(_computed)] = field(
        default_factory=dict
    )
    deletes: Annotated[str, OneOf(DELETE_MODES)] = "apply"
    type_mapping: Annotated[str, OneOf(TYPE_MAPPINGS)] = "default"
    history: Annotated[str, OneOf(HISTORY_MODES)] = "none"
    history_columns: Annotated[
        tuple[str, ...] | None, BeforeValidator(_column_names), WithJsonSchema(_NAMES)
    ] = None
    history_except_columns: Annotated[
        tuple[str, ...], BeforeValidator(_column_names), WithJsonSchema(_NAMES)
    ] = ()
    history_table: Annotated[str, BeforeValidator(_history_table)] = HISTORY_TABLE_DEFAULT
    # The kinds of schema change given an action (schema_policy); the others as evolve has them.
    schema_changes: Annotated[
        dict[str, str], BeforeValidator(_schema_changes), WithJsonSchema(_SCHEMA_CHANGES)
    ] = field(default_factory=dict)
    # Named checks of the row images, by name (a table's own add to "*"'s, or replace one).
    expectations: Annotated[
        dict[str, Expectation],
        BeforeValidator(_expectations),
        WithJsonSchema({"type": "object", "additionalProperties": _RULE}),
    ] = field(default_factory=dict)

    @property
    def schema_policy(self) -> SchemaPolicy:
        """What each kind of schema change does to the table."""
        return schema_policy(self.schema_changes)

    def history_of(self, table: str) -> HistoryOptions | None:
        """What keeping ``table``'s history takes, or None when it keeps none."""
        if self.history == "none":
            return None
        return HistoryOptions(
            self.history_table.format(table=table),
            self.history_columns,
            self.history_except_columns,
        )


# The pipeline-wide keys' types and defaults: a table's, as they apply to every table.
DeleteMode = Annotated[str, OneOf(DELETE_MODES)]
TypeMapping = Annotated[str, OneOf(TYPE_MAPPINGS)]
SchemaChanges = Annotated[
    dict[str, str], BeforeValidator(_schema_changes), WithJsonSchema(_SCHEMA_CHANGES)
]
DEFAULTS = TableOptions()


def parse_layer(raw: Any, where: str) -> dict[str, Any]:
    """One entry of ``table_options`` (or a pipeline's own keys): the options it sets.

    Raises:
        ConfigError: naming ``where``, the key and what is wrong.
    """
    options = validated(TableOptions, raw, where)
    return {str(key): getattr(options, str(key)) for key in raw}


def table_layers(value: Any) -> dict[str, dict[str, Any]]:
    """A pipeline's ``table_options``: each entry's options by table name (``"*"``: every
    table), the options it sets and no others."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError('expected a mapping of "*" or a table name -> options')
    layers = {}
    for table, raw in value.items():
        if not str(table).strip() or "." in str(table):
            raise ValueError(f'{table!r} is not "*" or a target table name')
        try:
            layers[str(table)] = parse_layer(raw, f"table_options.{table}")
        except ConfigError as exc:
            raise LocatedError(str(exc)) from None
    return layers
