"""A table's changes typed: each column's text converted to its type, with the first value that
does not fit as the change's ``_type_error`` (and its dead letter)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest import sql_text
from cdc_ingest.apply.update_images import KEEP_COLUMN, MOVED_COLUMN
from cdc_ingest.changes.resolve import BATCH_TEXT
from cdc_ingest.schema.values import column_error, typed_value
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
    changes, ``raw_value``), its type, and ``named_by`` as ``column_error`` takes it."""

    name: str
    raw: str
    column_type: ColumnType
    named_by: str | None = None


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
) -> DataFrame:
    """The typed frame's columns: where each change comes from (after the ``leading`` columns),
    its typed ``columns``, its change columns (``_cdc_batch_id`` from the batch's text, see
    ``BATCH_TEXT``), ``_type_error``, the first of the ``refusals`` and the columns' errors
    (null when every value fits), and the ``trailing`` expressions.

    Three projections, each reading the one before as columns: the raw texts, the typed values,
    then the errors. Written as one, every use of a raw text or typed value repeats its whole
    expression, and a wide table's plan grows by tens of nodes per column for Spark to analyse,
    optimise and compile (a projection that would evaluate an expression twice is not merged).
    """
    raws = sql_text.select(
        frame, ["*", *(f"{c.raw} AS {_raw_column(i)}" for i, c in enumerate(columns))]
    )
    typed = sql_text.select(
        raws,
        [
            "*",
            *(
                f"{typed_value(_raw_column(i), c.column_type)} AS {_typed_column(i)}"
                for i, c in enumerate(columns)
            ),
        ],
    )
    errors = [
        *(refusals or []),
        *(
            column_error(c.name, _raw_column(i), _typed_column(i), c.column_type, c.named_by)
            for i, c in enumerate(columns)
        ),
    ]
    error = ", ".join([*errors, "CAST(NULL AS STRING)"])
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
            *(f"{_typed_column(i)} AS {sql_text.name(c.name)}" for i, c in enumerate(columns)),
            f"_cdc_order AS {ORDER_COLUMN}",
            "op AS _cdc_op",
            f"CAST({BATCH_TEXT} AS BIGINT) AS _cdc_batch_id",
            f"coalesce({error}) AS _type_error",
            *(trailing or []),
        ],
    )


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
    return computed_columns(frame, target)


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
