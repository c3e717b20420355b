"""Kafka Connect schemas (as embedded by Debezium-style converters) to column types."""

from __future__ import annotations

import json
from typing import Any

from cdc_ingest.contract import ColumnType, TypeHint

PRIMITIVES: dict[str, ColumnType] = {
    "int8": ColumnType("int"),
    "int16": ColumnType("int"),
    "int32": ColumnType("int"),
    "int64": ColumnType("bigint"),
    "float": ColumnType("float"),
    "float32": ColumnType("float"),
    "float64": ColumnType("double"),
    "double": ColumnType("double"),
    "boolean": ColumnType("boolean"),
    "string": ColumnType("string"),
    "bytes": ColumnType("binary", "base64"),
}

# Logical types by schema name (the table in docs/formats.md). Times of day have no Spark type
# and keep their physical type. Debezium's Timestamp, MicroTimestamp and NanoTimestamp carry a
# column without zone (MySQL DATETIME, PostgreSQL timestamp) as if its wall-clock time were UTC:
# a timestamp without time zone. Connect's Timestamp and ZonedTimestamp are instants.
LOGICAL: dict[str, ColumnType] = {
    "io.debezium.time.Date": ColumnType("date", "epoch_days"),
    "org.apache.kafka.connect.data.Date": ColumnType("date", "epoch_days"),
    "io.debezium.time.Timestamp": ColumnType("timestamp_ntz", "epoch_millis"),
    "org.apache.kafka.connect.data.Timestamp": ColumnType("timestamp", "epoch_millis"),
    "io.debezium.time.MicroTimestamp": ColumnType("timestamp_ntz", "epoch_micros"),
    "io.debezium.time.NanoTimestamp": ColumnType("timestamp_ntz", "epoch_nanos"),
    "io.debezium.time.ZonedTimestamp": ColumnType("timestamp"),
    "io.debezium.data.Json": ColumnType("string"),
    "io.debezium.data.Enum": ColumnType("string"),
    "io.debezium.data.EnumSet": ColumnType("string"),
    "io.debezium.data.Uuid": ColumnType("string"),
    "io.debezium.data.Bits": ColumnType("binary", "base64"),
    "io.debezium.time.Year": ColumnType("int"),
    # Times of day as the database writes them (HH:mm:ss[.ffffff]): Spark has no time type, and
    # a MySQL TIME is a duration that may pass 24 hours or be negative.
    "io.debezium.time.Time": ColumnType("string", "time_millis"),
    "org.apache.kafka.connect.data.Time": ColumnType("string", "time_millis"),
    "io.debezium.time.MicroTime": ColumnType("string", "time_micros"),
    "io.debezium.time.NanoTime": ColumnType("string", "time_nanos"),
    # A numeric without a declared scale (PostgreSQL numeric, Oracle NUMBER): each value brings
    # its scale. Iceberg's decimals have one, so such a column is decimal(38,18), as Flink's
    # JDBC catalog maps PostgreSQL's numeric: 20 digits before the point, 18 after. A value
    # needing more is dead-lettered, never rounded; type_mapping: to-string keeps its exact text.
    "io.debezium.data.VariableScaleDecimal": ColumnType("decimal(38,18)", "variable_decimal"),
}

DECIMAL = "org.apache.kafka.connect.data.Decimal"
IMAGE_FIELDS = ("after", "before")


def column_type(field: dict[str, Any]) -> ColumnType:
    """The column type of one Connect field; nested structs, arrays and maps stay JSON text."""
    name = field.get("name")
    if name == DECIMAL:
        params = field.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        precision = max(min(precision, 38), scale, 1)
        return ColumnType(f"decimal({precision},{scale})", "connect_decimal", scale)
    if isinstance(name, str) and name in LOGICAL:
        return LOGICAL[name]
    return PRIMITIVES.get(str(field.get("type")), ColumnType("string"))


def image_fields(schema: Any) -> list[dict[str, Any]] | None:
    """The fields of the row struct (``after``, else ``before``) of an envelope schema."""
    if not isinstance(schema, dict):
        return None
    fields = schema.get("fields")
    if not isinstance(fields, list):
        return None
    by_name = {f.get("field"): f for f in fields if isinstance(f, dict)}
    for image in IMAGE_FIELDS:
        struct = by_name.get(image)
        if isinstance(struct, dict) and isinstance(struct.get("fields"), list):
            return [f for f in struct["fields"] if isinstance(f, dict) and "field" in f]
    return None


def type_hint_from_schema(schema_text: str) -> TypeHint | None:
    """Column types from an envelope's Connect ``schema`` (JSON text), or None without one."""
    try:
        schema = json.loads(schema_text)
    except (TypeError, ValueError):
        return None
    fields = image_fields(schema)
    if not fields:
        return None
    return TypeHint({str(f["field"]): column_type(f) for f in fields})
