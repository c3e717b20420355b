"""Spark SQL column types and pyiceberg schemas, converted as Iceberg's Spark integration does,
for the tables ``arrow_catalog`` creates, reads and writes without Spark."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import IcebergType

# Spark SQL type -> pyiceberg type name (pyiceberg.types), as Iceberg's SparkSchemaUtil converts.
_PRIMITIVES = {
    "bigint": "LongType",
    "int": "IntegerType",
    "string": "StringType",
    "double": "DoubleType",
    "float": "FloatType",
    "boolean": "BooleanType",
    "date": "DateType",
    "timestamp": "TimestamptzType",
    "timestamp_ntz": "TimestampType",
    "binary": "BinaryType",
}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_ARRAY = re.compile(r"array<(\w+)>")


def _iceberg_type(spark_type: str, next_id: list[int]) -> IcebergType | None:
    import pyiceberg.types as types

    if spark_type in _PRIMITIVES:
        primitive: IcebergType = getattr(types, _PRIMITIVES[spark_type])()
        return primitive
    decimal = _DECIMAL.fullmatch(spark_type)
    if decimal:
        return types.DecimalType(int(decimal[1]), int(decimal[2]))
    array = _ARRAY.fullmatch(spark_type)
    if array and array[1] in _PRIMITIVES:
        element_id = next_id[0]
        next_id[0] += 1
        element = _iceberg_type(array[1], next_id)
        assert element is not None  # a primitive
        return types.ListType(element_id, element, element_required=False)
    return None


def spark_type_of(iceberg_type: IcebergType) -> str | None:
    """The Spark SQL name (``simpleString``) of a primitive, decimal or list-of-primitive type."""
    import pyiceberg.types as types

    if isinstance(iceberg_type, types.DecimalType):
        return f"decimal({iceberg_type.precision},{iceberg_type.scale})"
    if isinstance(iceberg_type, types.ListType):
        element = spark_type_of(iceberg_type.element_type)
        is_primitive = element is not None and not element.startswith("array<")
        return f"array<{element}>" if is_primitive else None
    for spark_type, name in _PRIMITIVES.items():
        if type(iceberg_type) is getattr(types, name):
            return spark_type
    return None


def iceberg_schema(columns: dict[str, str], keys: tuple[str, ...]) -> Schema | None:
    """The schema Iceberg's SparkSchemaUtil gives these columns (top-level ids first, then nested
    ones), or None for a type not in ``_PRIMITIVES`` (decimals and arrays of primitives aside)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    next_id = [len(columns) + 1]
    fields = []
    for number, (name, spark_type) in enumerate(columns.items(), start=1):
        converted = _iceberg_type(spark_type.lower(), next_id)
        if converted is None:
            return None
        fields.append(NestedField(number, name, converted, required=name in keys))
    ids = [f.field_id for f in fields if f.name in keys]
    return Schema(*fields, identifier_field_ids=ids)


def as_table_rows(rows: pa.Table, schema: Schema) -> pa.Table:
    """``rows`` in the table's column order and Arrow types (Spark's Arrow names list elements
    and time zones its own way); a column the rows lack is null."""
    import pyarrow as pa

    wanted = schema.as_arrow()
    held = set(rows.column_names)  # a list built anew on each access: once for a wide table
    columns = [
        rows.column(f.name) if f.name in held else pa.nulls(rows.num_rows, f.type) for f in wanted
    ]
    return pa.Table.from_arrays(columns, names=wanted.names).cast(wanted)
