"""A table's design from its options: computed columns, partition spec, write order, properties.

Applied when a table is created; on an existing table a changed partition spec or write order is
evolved the Iceberg way (a new spec for new data, files already written keep theirs) and changed
properties are set; nothing is rewritten. What was configured is kept in the table's properties
(``cdc.partition-by``, ``cdc.sort-by``), so that a batch compares the configuration with what it
last applied and reports each change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdc_ingest.catalog_commits import execute
from cdc_ingest.contract import ColumnType
from cdc_ingest.state.tables import quote
from cdc_ingest.table_options import (
    DELETED_COLUMN,
    PartitionField,
    SortField,
    TableDesignError,
    TableOptions,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PARTITION_PROPERTY = "cdc.partition-by"
SORT_PROPERTY = "cdc.sort-by"

# Source types each transform takes (Iceberg's spec), by the Spark type's name.
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_TEMPORAL = ("date", "timestamp", "timestamp_ntz")
_TRANSFORM_TYPES = {
    "bucket": (*_INTEGRAL, "decimal", *_TEMPORAL, "string", "binary"),
    "truncate": (*_INTEGRAL, "decimal", "string", "binary"),
    "years": _TEMPORAL,
    "months": _TEMPORAL,
    "days": _TEMPORAL,
    "hours": ("timestamp", "timestamp_ntz"),
}


def computed_types(
    spark: SparkSession, columns: dict[str, ColumnType], computed: dict[str, str]
) -> dict[str, ColumnType]:
    """Each computed column's type: what Spark makes of its expression over the source columns.

    Raises a TableDesignError naming the column when Spark cannot resolve the expression.
    """
    if not computed:
        return {}
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    schema = ", ".join(f"{quote(n)} {c.spark_type}" for n, c in columns.items()) or "_none int"
    empty = spark.createDataFrame([], schema)
    types: dict[str, ColumnType] = {}
    for name, expression in computed.items():
        if name.lower() in {c.lower() for c in columns}:
            raise TableDesignError(f"computed column {name} is also a source column")
        try:
            field = empty.select(F.expr(expression).alias(name)).schema.fields[0]
        except AnalysisException as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise TableDesignError(f"computed column {name} = {expression}: {first}") from None
        types[name] = ColumnType(field.dataType.simpleString())
    return types


def check_design(options: TableOptions, columns: dict[str, str]) -> None:
    """Partition and sort fields name columns of the table, of types their transforms take."""
    lowered = {n.lower(): t for n, t in columns.items()}
    for part in options.partition_by:
        spark_type = lowered.get(part.column.lower())
        if spark_type is None:
            raise TableDesignError(
                f"partition_by {part.text}: the table has no column {part.column}"
            )
        allowed = _TRANSFORM_TYPES.get(part.transform)
        base = spark_type.split("(")[0]
        if allowed is not None and base not in allowed:
            raise TableDesignError(
                f"partition_by {part.text}: {part.transform} does not take a {spark_type} column"
            )
    for sort in options.sort_by:
        if sort.column.lower() not in lowered:
            raise TableDesignError(f"sort_by {sort.text}: the table has no column {sort.column}")


def spec_text(fields: tuple[PartitionField, ...]) -> str:
    """The recorded form of a partition spec (``cdc.partition-by``)."""
    return "; ".join(f.text for f in fields)


def order_text(fields: tuple[SortField, ...]) -> str:
    """The recorded form of a write order (``cdc.sort-by``)."""
    return ", ".join(f.text for f in fields)


def created_properties(options: TableOptions) -> dict[str, str]:
    """Table properties a new table gets from its options (besides the job's defaults)."""
    return {
        **options.properties,
        PARTITION_PROPERTY: spec_text(options.partition_by),
        SORT_PROPERTY: order_text(options.sort_by),
    }


@dataclass(frozen=True)
class Creation:
    """What a CREATE TABLE adds for a table's options (see ``state.tables.create_target``)."""

    properties: dict[str, str]
    extra_columns: dict[str, str]
    partitioned_by: tuple[str, ...]
    write_order: tuple[str, ...]
    computed: dict[str, ColumnType]


def creation(
    spark: SparkSession, options: TableOptions, columns: dict[str, ColumnType]
) -> Creation:
    """Type the computed columns over ``columns`` and check the design before a table exists."""
    computed = computed_types(spark, columns, options.computed_columns)
    extra = {n: c.spark_type for n, c in computed.items()} | system_columns(options)
    check_design(options, {c: t.spark_type for c, t in columns.items()} | extra)
    return Creation(
        properties=created_properties(options),
        extra_columns=extra,
        partitioned_by=tuple(f.sql() for f in options.partition_by),
        write_order=tuple(f.sql() for f in options.sort_by),
        computed=computed,
    )


def system_columns(options: TableOptions) -> dict[str, str]:
    """Columns the job adds for the table's options: ``_cdc_deleted`` for soft deletes."""
    return {DELETED_COLUMN: "boolean"} if options.deletes == "soft" else {}


def evolve_design(
    spark: SparkSession,
    identifier: str,
    options: TableOptions,
    properties: dict[str, str],
    columns: dict[str, str],
) -> list[str]:
    """Bring an existing table's spec, order, properties and option columns to its options.

    Returns what changed, one line each (empty when the table already matches).
    """
    changes: list[str] = []
    added = {n: t for n, t in system_columns(options).items() if n not in columns}
    if added:
        definitions = ", ".join(f"{quote(n)} {t}" for n, t in added.items())
        execute(spark, f"ALTER TABLE {identifier} ADD COLUMNS ({definitions})")
        changes += [f"column {n} added (deletes: {options.deletes})" for n in added]
    check_design(options, {**columns, **added})
    recorded: dict[str, str] = {}
    old_spec = [p for p in properties.get(PARTITION_PROPERTY, "").split("; ") if p]
    new_spec = [f.text for f in options.partition_by]
    if old_spec != new_spec:
        by_text = {f.text: f for f in options.partition_by}
        for text in old_spec:
            if text not in new_spec:
                execute(spark, f"ALTER TABLE {identifier} DROP PARTITION FIELD {_field_sql(text)}")
        for text in new_spec:
            if text not in old_spec:
                execute(
                    spark, f"ALTER TABLE {identifier} ADD PARTITION FIELD {by_text[text].sql()}"
                )
        recorded[PARTITION_PROPERTY] = spec_text(options.partition_by)
        changes.append(
            f"partition spec [{', '.join(old_spec)}] -> [{', '.join(new_spec)}] "
            "(new data only: written files keep their spec)"
        )
    old_order = properties.get(SORT_PROPERTY, "")
    new_order = order_text(options.sort_by)
    if old_order != new_order:
        if options.sort_by:
            fields = ", ".join(f.sql() for f in options.sort_by)
            execute(spark, f"ALTER TABLE {identifier} WRITE ORDERED BY {fields}")
        else:
            execute(spark, f"ALTER TABLE {identifier} WRITE UNORDERED")
        recorded[SORT_PROPERTY] = new_order
        changes.append(f"write order [{old_order}] -> [{new_order}] (new data only)")
    changed = {k: v for k, v in options.properties.items() if properties.get(k) != v}
    changes += [f"property {k}: {properties.get(k)} -> {v}" for k, v in changed.items()]
    recorded |= changed
    if recorded:
        assignments = ", ".join(f"{_string(k)}={_string(v)}" for k, v in recorded.items())
        execute(spark, f"ALTER TABLE {identifier} SET TBLPROPERTIES ({assignments})")
    return changes


def _field_sql(text: str) -> str:
    from cdc_ingest.table_options import parse_partition_field

    return parse_partition_field(text).sql()


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
