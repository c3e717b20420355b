"""A table's changes typed: each column's text converted to its type, with the first value that
does not fit as the change's ``_type_error`` (and its dead letter)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest import sql_text
from cdc_ingest.apply.expectations import with_dropped_changes
from cdc_ingest.apply.update_images import KEEP_COLUMN, MOVED_COLUMN
from cdc_ingest.changes.resolve import BATCH_TEXT
from cdc_ingest.schema.values import column_error, typed_entry, typed_value
from cdc_ingest.sql_text import literal
from cdc_ingest.state.tables import ORDER_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdc_ingest.contract import ColumnType
    from cdc_ingest.schema.target import TargetTable

# The typed frame's inner columns (``typed_select``): a source column never begins with the
# job's prefix (``schema.names``), so these cannot meet one.
RAW_PREFIX = "_cdc_raw_"
TYPED_PREFIX = "_cdc_typed_"
BY_TYPE_PREFIX = "_cdc_by_type_"
# Tables wider than this many columns, with at most this many values (rows times columns) in a
# batch, are typed by column type (``types_by_type``).
WIDE_COLUMNS = 100
BY_TYPE_VALUES = 500_000


def raw_value(name: str, keyed: bool | str, named_by: str | None = None) -> str:
    """A column's text (SQL text): from the image, or for a key column (where ``keyed`` holds, a
    condition in SQL text) from the message's key values first. ``named_by``: a column naming,
    per change, the value to take (a group's slot of several names, ``group_layout``)."""
    key = named_by or literal(name)
    image = f"element_at(image, {key})"
    if keyed is False:
        return image
    key_value = f"coalesce(element_at(key_values, {key}), {image})"
    return key_value if keyed is True else f"CASE WHEN {keyed} THEN {key_value} ELSE {image} END"


@dataclass(frozen=True)
class TypedColumn:
    """One column of the typed frame: its ``name``, its ``raw`` text (SQL text over the
    changes, ``raw_value``), its type, ``named_by`` as ``column_error`` takes it, and
    ``image_names``: the names of the image's values ``raw`` is one of, where it is only the
    image's value (not a key column's, nor a placeholder's), else none."""

    name: str
    raw: str
    column_type: ColumnType
    named_by: str | None = None
    image_names: tuple[str, ...] = ()


def _raw_column(index: int) -> str:
    return f"{RAW_PREFIX}{index}"


def _typed_column(index: int) -> str:
    return f"{TYPED_PREFIX}{index}"


def typed_select(
    frame: DataFrame,
    columns: list[TypedColumn],
    refusals: list[str] | None = None,
    leading: list[str] | None = None,
    trailing: list[str] | None = None,
    by_type: bool = False,
) -> DataFrame:
    """The typed frame's columns: where each change comes from (after the ``leading`` columns),
    its typed ``columns``, its change columns (``_cdc_batch_id`` from the batch's text, see
    ``BATCH_TEXT``), ``_type_error``, the first of the ``refusals`` and the columns' errors
    (null when every value fits), and the ``trailing`` expressions.

    Three projections, each reading the one before as columns: the raw texts, the typed values,
    then the errors. Written as one, every use of a raw text or typed value repeats its whole
    expression, and a wide table's plan grows by tens of nodes per column for Spark to analyse,
    optimise and compile (a projection that would evaluate an expression twice is not merged).
    ``by_type`` (``types_by_type``): the columns only an image holds are typed by column type,
    into one map per type (``_type_maps``). The columns each read by their own name stay in
    their type's map, the frame as narrow as its types, until ``typed_values`` looks them up
    (every later step would otherwise walk each of a wide table's columns again); a column
    named per change (``named_by``) is a lookup into its map here.
    """
    maps = _type_maps(columns) if by_type else []
    looked_up = {i: m.lookup(columns[i]) for m in maps for i in m.held}
    kept = {i for m in maps if m.deferred for i in m.held}
    own = [i for i in range(len(columns)) if i not in looked_up]
    raws = sql_text.select(
        frame,
        [
            "*",
            *(f"{m.expression} AS {m.name}" for m in maps),
            *(f"{columns[i].raw} AS {_raw_column(i)}" for i in own),
        ],
    )
    typed = sql_text.select(
        raws,
        [
            "*",
            *(
                f"{typed_value(_raw_column(i), columns[i].column_type)} AS {_typed_column(i)}"
                for i in own
            ),
            *(f"{entry} AS {_typed_column(i)}" for i, entry in looked_up.items() if i not in kept),
        ],
    )

    def value(i: int) -> str:
        return f"{_typed_column(i)}.value" if i in looked_up else _typed_column(i)

    def error_of(i: int) -> str:
        if i in looked_up:
            return f"{_typed_column(i)}.error"
        c = columns[i]
        return column_error(c.name, _raw_column(i), _typed_column(i), c.column_type, c.named_by)

    shown = [i for i in range(len(columns)) if i not in kept]
    errors = [(i, error_of(i)) for i in shown]
    first = [_first_error(errors, maps)] if by_type else [e for _, e in errors]
    error = ", ".join([*(refusals or []), *first, "CAST(NULL AS STRING)"])
    return sql_text.select(
        typed,
        [
            *(sql_text.name(column) for column in leading or []),
            "_cdc_file_idx",
            "_cdc_line",
            "row_in_message",
            "_cdc_kind",
            "_cdc_key",
            "_cdc_source",
            *(f"{value(i)} AS {sql_text.name(columns[i].name)}" for i in shown),
            *(m.name for m in maps if m.deferred),
            f"_cdc_order AS {ORDER_COLUMN}",
            "op AS _cdc_op",
            f"CAST({BATCH_TEXT} AS BIGINT) AS _cdc_batch_id",
            f"coalesce({error}) AS _type_error",
            *(trailing or []),
        ],
    )


def _first_error(errors: list[tuple[int, str]], maps: list[_TypeMap]) -> str:
    """SQL text: the error of the first column, in the columns' order, whose value does not
    fit, from the ``errors`` of the columns by their index and the entries of the maps that
    keep their columns (each map's failed entries ranked by their column's index)."""
    ranked = [
        f"CASE WHEN {e} IS NOT NULL THEN named_struct('at', {i}, 'error', {e}) END"
        for i, e in errors
    ]
    for m in maps:
        if m.deferred:
            failed = f"filter(map_entries({m.name}), _e -> _e.value.error IS NOT NULL)"
            at = f"element_at({m.positions}, _e.key)"
            ranked.append(
                f"array_min(transform({failed},"
                f" _e -> named_struct('at', {at}, 'error', _e.value.error)))"
            )
    if not ranked:
        return "CAST(NULL AS STRING)"
    first = ranked[0] if len(ranked) == 1 else f"least({', '.join(ranked)})"
    return f"({first}).error"


def typed_values(frame: DataFrame, columns: list[TypedColumn]) -> DataFrame:
    """``frame`` (``typed_select``'s, by type, or a frame of its rows further on) with the
    values its type maps keep looked up into their columns, and without the maps (itself when
    it has none): the last step of a wide table's changes before they are collected or
    written."""
    maps = [m for m in _type_maps(columns) if m.deferred and m.name in frame.columns]
    if not maps:
        return frame
    dropped = {m.name for m in maps}
    return sql_text.select(
        frame,
        [
            *(sql_text.name(c) for c in frame.columns if c not in dropped),
            *(
                f"{m.lookup(columns[i])}.value AS {sql_text.name(columns[i].name)}"
                for m in maps
                for i in m.held
            ),
        ],
    )


def is_type_map(column: str) -> bool:
    """Whether a typed frame's column is a type's map of columns (``typed_select``)."""
    return column.startswith(BY_TYPE_PREFIX)


def types_by_type(columns: int, rows: int) -> bool:
    """Whether ``rows`` changes of a table (or group) of ``columns`` columns are typed by column
    type: wide enough that planning one expression per column costs more than interpreting
    one lambda per type over few enough values (``typed_select``)."""
    return columns > WIDE_COLUMNS and columns * rows <= BY_TYPE_VALUES


@dataclass(frozen=True)
class _TypeMap:
    """One type's typed entries (``values.typed_entry``): ``expression`` (SQL text) holds the
    image's value of every name a column of the type reads, typed once, keyed by that name;
    ``held``: the indices of those columns; ``deferred``: whether each is read by its own name
    (none ``named_by``), so that the map can stand for them until ``typed_values``."""

    name: str
    expression: str
    held: tuple[int, ...]
    positions: str  # SQL text: a map of each held column's name to its index
    deferred: bool

    def lookup(self, column: TypedColumn) -> str:
        """SQL text: ``column``'s entry, the struct of its value and error."""
        return f"element_at({self.name}, {column.named_by or literal(column.name)})"


def _type_maps(columns: list[TypedColumn]) -> list[_TypeMap]:
    """The maps of each type's columns only an image holds, in the order of their first column
    (deterministic: ``typed_select`` and ``typed_values`` each compute them)."""
    of_type: dict[ColumnType, list[int]] = {}
    for i, c in enumerate(columns):
        if c.image_names:
            of_type.setdefault(c.column_type, []).append(i)
    maps: list[_TypeMap] = []
    for n, (ctype, held) in enumerate(of_type.items()):
        names = dict.fromkeys(name for i in held for name in columns[i].image_names)
        keys = ", ".join(literal(name) for name in names)
        entry = typed_entry("_cv", ctype, "_ck")
        expression = (
            f"transform_values(map_filter(image, (_ck, _cv) -> _ck IN ({keys})),"
            f" (_ck, _cv) -> {entry})"
        )
        deferred = all(columns[i].named_by is None for i in held)
        pairs = ", ".join(f"{literal(columns[i].name)}, {i}" for i in held)
        maps.append(
            _TypeMap(f"{BY_TYPE_PREFIX}{n}", expression, tuple(held), f"map({pairs})", deferred)
        )
    return maps


def typed_changes(changes: DataFrame, target: TargetTable, event_time: bool = False) -> DataFrame:
    """This table's changes with typed columns and ``_type_error`` for values that don't fit;
    ``event_time``: with the source's time of each (``_cdc_event_ms``, epoch millis or null)."""
    columns: list[TypedColumn] = []
    kept: list[str] = []
    for name, ctype in target.columns.items():
        raw = raw_value(name, name in target.keys)
        if target.unavailable_values and name not in target.keys:
            placeholders = ", ".join(literal(v) for v in target.unavailable_values)
            missing = f"{raw} IN ({placeholders})"
            kept.append(f"CASE WHEN {missing} THEN {literal(name)} END")
            raw = f"CASE WHEN NOT ({missing}) THEN {raw} END"
        columns.append(TypedColumn(name, raw, ctype))
    refusals = [
        f"CASE WHEN array_contains(map_keys(image), {literal(refused)}) THEN {literal(why)} END"
        for refused, why in target.refused_columns.items()
    ]
    moved = [MOVED_COLUMN] if MOVED_COLUMN in changes.columns else []
    frame = typed_select(
        changes.where(f"_cdc_target = {literal(target.name)}"),
        columns,
        refusals,
        leading=moved,
        trailing=[
            *([f"array_compact(array({', '.join(kept)})) AS {KEEP_COLUMN}"] if kept else []),
            *(["event_ms AS _cdc_event_ms"] if event_time else []),
        ],
    )
    return with_dropped_changes(computed_columns(frame, target), target)


def computed_columns(typed: DataFrame, target: TargetTable) -> DataFrame:
    """``typed`` with the table's computed columns (``table_options``' ``computed_columns``),
    each over the typed source columns, so that ``year(created_at)`` sees a date, not text."""
    if not target.computed:
        return typed
    return typed.select(
        "*",
        *[
            F.expr(expression).cast(ctype.spark_type).alias(name)
            for name, (expression, ctype) in target.computed.items()
        ],
    )


def typing_errors(typed: DataFrame, target: TargetTable) -> DataFrame:
    """The dead letters of ``typed_changes``: where, why, and from which table to which.

    The delete of a moved row's old key is not a message of its own: its errors are not.
    """
    if MOVED_COLUMN in typed.columns:
        typed = typed.where(~F.col(MOVED_COLUMN))
    return typed.where(F.col("_type_error").isNotNull()).select(
        "_cdc_file_idx",
        "_cdc_line",
        "row_in_message",
        F.col("_type_error").alias("reason"),
        F.col("_cdc_source").alias("source_table"),
        F.lit(target.name).alias("target_table"),
    )
