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
from typing import Any

from cdc_ingest.iceberg_properties import PropertyError, validate_property
from cdc_ingest.schema_policy import (
    SchemaPolicy,
    SchemaPolicyError,
    parse_schema_changes,
    schema_policy,
)

EVERY_TABLE = "*"
DELETE_MODES = ("apply", "ignore", "soft")
TYPE_MAPPINGS = ("default", "to-string")
OPTION_KEYS = (
    "partition_by",
    "sort_by",
    "properties",
    "computed_columns",
    "deletes",
    "type_mapping",
    "history",
    "history_columns",
    "history_except_columns",
    "history_table",
    "schema_changes",
    "expectations",
)
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
class TableOptions:
    """Everything that shapes one mirrored table (the defaults: what every table got before)."""

    partition_by: tuple[PartitionField, ...] = ()
    sort_by: tuple[SortField, ...] = ()
    properties: dict[str, str] = field(default_factory=dict)
    computed_columns: dict[str, str] = field(default_factory=dict)
    deletes: str = "apply"
    type_mapping: str = "default"
    history: str = "none"
    history_columns: tuple[str, ...] | None = None
    history_except_columns: tuple[str, ...] = ()
    history_table: str = HISTORY_TABLE_DEFAULT
    # The kinds of schema change given an action (schema_policy); the others as evolve has them.
    schema_changes: dict[str, str] = field(default_factory=dict)
    # Named checks of the row images, by name (a table's own add to "*"'s, or replace one).
    expectations: dict[str, Expectation] = field(default_factory=dict)

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

    def ignoring_schema_changes(self) -> PipelineTableOptions:
        """These options with every table's schema kept as it is (``schema_changes: ignore``)."""
        layers = {
            name: {k: v for k, v in layer.items() if k != "schema_changes"}
            for name, layer in self.layers.items()
        }
        layers[""] = {**layers.get("", {}), "schema_changes": parse_schema_changes("ignore")}
        return PipelineTableOptions(layers)

    @property
    def soft_deletes_anywhere(self) -> bool:
        """Whether any table of the pipeline may keep deleted rows."""
        return any(layer.get("deletes") == "soft" for layer in self.layers.values())


def parse_partition_field(text: Any) -> PartitionField:
    """``bucket(16, id)``, ``truncate(4, name)``, ``days(ts)``, ``identity(region)``, ``region``."""
    match = _TRANSFORM.match(str(text)) if isinstance(text, str) else None
    if match is None:
        raise TableOptionsError(
            f"partition_by: {text!r} is not an Iceberg transform (a column, identity(col), "
            "bucket(N, col), truncate(W, col), years(col), months(col), days(col), hours(col))"
        )
    if match["plain"]:
        return PartitionField("identity", match["plain"])
    if match["unary"]:
        transform = match["unary"].lower()
        return PartitionField(_PLURAL.get(transform, transform), match["ucol"])
    width = int(match["n"])
    if width < 1:
        raise TableOptionsError(f"partition_by: {text!r}: the width must be at least 1")
    return PartitionField(match["binary"].lower(), match["bcol"], width)


def parse_sort_field(text: Any) -> SortField:
    """``col``, ``col DESC``, ``col ASC NULLS LAST``."""
    match = _SORT.match(text) if isinstance(text, str) else None
    if match is None:
        raise TableOptionsError(
            f"sort_by: {text!r} is not a sort field (column [ASC|DESC] [NULLS FIRST|LAST])"
        )
    nulls = match["nulls"]
    return SortField(
        match["col"],
        descending=(match["dir"] or "asc").lower() == "desc",
        nulls_first=None if nulls is None else nulls.lower() == "first",
    )


def _property(key: str, value: Any) -> str:
    try:
        return validate_property(key, value)
    except PropertyError as exc:
        raise TableOptionsError(f"properties.{key}: {exc}") from None


def _choice(value: Any, key: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise TableOptionsError(f"{key}: {value!r} must be one of {', '.join(choices)}")
    return str(value)


def _as_list(value: Any, key: str) -> list[Any]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise TableOptionsError(f"{key}: expected a list")
    return value


def parse_layer(raw: Any, where: str) -> dict[str, Any]:
    """One entry of ``table_options`` as :class:`TableOptions` field values."""
    if not isinstance(raw, dict):
        raise TableOptionsError(f"{where}: expected a mapping of {', '.join(OPTION_KEYS)}")
    layer: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            if key == "partition_by":
                fields = tuple(parse_partition_field(v) for v in _as_list(value, key))
                sources = [f.column for f in fields]
                if len(set(fields)) != len(fields):
                    raise TableOptionsError(f"partition_by: a transform is repeated: {sources}")
                layer[key] = fields
            elif key == "sort_by":
                layer[key] = tuple(parse_sort_field(v) for v in _as_list(value, key))
            elif key == "properties":
                if not isinstance(value, dict):
                    raise TableOptionsError("properties: expected a mapping of name -> value")
                layer[key] = {str(k): _property(str(k), v) for k, v in value.items()}
            elif key == "computed_columns":
                layer[key] = _computed(value)
            elif key == "deletes":
                layer[key] = _choice(value, "deletes", DELETE_MODES)
            elif key == "type_mapping":
                layer[key] = _choice(value, "type_mapping", TYPE_MAPPINGS)
            elif key == "history":
                layer[key] = _choice(value, "history", HISTORY_MODES)
            elif key in _TRACKING:
                layer[key] = _column_names(value, key)
            elif key == "history_table":
                layer[key] = _history_table(value)
            elif key == "expectations":
                layer[key] = _expectations(value)
            elif key == "schema_changes":
                try:
                    layer[key] = parse_schema_changes(value)
                except SchemaPolicyError as exc:
                    raise TableOptionsError(str(exc)) from None
            else:
                raise TableOptionsError(
                    f"unknown table option {key!r} (known: {', '.join(OPTION_KEYS)})"
                )
        except TableOptionsError as exc:
            raise TableOptionsError(f"{where}.{exc}") from None
    return layer


def _column_names(value: Any, key: str) -> tuple[str, ...]:
    names = _as_list(value, key)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise TableOptionsError(f"{key}: expected a list of column names")
    return tuple(n.strip() for n in names)


def _history_table(value: Any) -> str:
    example = HISTORY_TABLE_DEFAULT.format(table="orders")
    if not isinstance(value, str) or "{table}" not in value:
        raise TableOptionsError(
            f"history_table: expected a name containing {{table}}, e.g. {HISTORY_TABLE_DEFAULT!r}"
        )
    try:
        name = value.format(table="orders")
    except (KeyError, IndexError, ValueError):
        raise TableOptionsError(
            f"history_table: {value!r} may hold only {{table}} in braces"
        ) from None
    if name == "orders" or not name.strip() or "." in name or name.startswith("_cdc_"):
        raise TableOptionsError(
            f"history_table: {value!r} must name another table of the namespace "
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
            "expectations: expected a mapping of rule name -> {check: <Spark SQL boolean "
            "expression>, on_violation: warn | drop | fail}"
        )
    rules: dict[str, Expectation] = {}
    for name, rule in value.items():
        where = f"expectations.{name}"
        if not re.fullmatch(_NAME, str(name)):
            raise TableOptionsError(f"{where}: a rule name is letters, digits and _")
        if isinstance(rule, str):
            rule = {"check": rule}
        if not isinstance(rule, dict) or set(rule) - {"check", "on_violation"}:
            raise TableOptionsError(f"{where}: expected {{check: ..., on_violation: ...}}")
        check = rule.get("check")
        if not isinstance(check, str) or not check.strip():
            raise TableOptionsError(f"{where}.check: expected a Spark SQL boolean expression")
        action = _choice(rule.get("on_violation", "warn"), f"{where}.on_violation", ON_VIOLATION)
        rules[str(name)] = Expectation(str(name), " ".join(check.split()), action)
    return rules


def _computed(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not value:
        raise TableOptionsError(
            "computed_columns: expected a mapping of column name -> Spark SQL expression"
        )
    computed: dict[str, str] = {}
    for name, expression in value.items():
        if not re.fullmatch(_NAME, str(name)) or str(name).lower().startswith("_cdc_"):
            raise TableOptionsError(
                f"computed_columns.{name}: a column name is letters, digits and _ "
                "(not starting with _cdc_)"
            )
        if not isinstance(expression, str) or not expression.strip():
            raise TableOptionsError(f"computed_columns.{name}: expected a Spark SQL expression")
        computed[str(name)] = expression.strip()
    return computed


def parse_table_options(raw: dict[str, Any], where: str) -> PipelineTableOptions:
    """A pipeline's ``table_options``, ``deletes``, ``type_mapping`` and ``schema_changes`` keys."""
    layers: dict[str, dict[str, Any]] = {}
    wide = {k: raw[k] for k in PIPELINE_WIDE if k in raw}
    if wide:
        layers[""] = parse_layer(wide, where)
    entries = raw.get("table_options")
    if entries is None:
        return PipelineTableOptions(layers)
    if not isinstance(entries, dict):
        raise TableOptionsError(
            f'{where}.table_options: expected a mapping of "*" or a table name -> options'
        )
    for table, options in entries.items():
        table = str(table)
        if not table.strip() or "." in table:
            raise TableOptionsError(
                f'{where}.table_options: {table!r} is not "*" or a target table name'
            )
        layers[table] = parse_layer(options, f"{where}.table_options.{table}")
    return PipelineTableOptions(layers)
