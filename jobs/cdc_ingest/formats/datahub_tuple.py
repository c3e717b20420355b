"""Alibaba DataHub Tuple topics written by DataWorks Data Integration (seed 002).

One JSON object per line: the topic's columns (one topic per source table) plus the metadata
columns ``_sequence_id_``, ``_operation_type_`` (I/U/D), ``_excute_time_`` (sic),
``_source_table_``, ``_before_image_`` and ``_after_image_`` (Y/N).
An UPDATE is two records sharing a sequence id: the before image (Y,N), then the after image
(N,Y). Every record holds every column of the topic, so the after image alone is the whole new
row: it is applied as an upsert, and the before image changes no row. A batch that ends between
the two halves therefore loses nothing and applies nothing wrong: the next batch's after image
completes the update.

Keys come from the pipeline's ``keys``; types from its ``columns`` option (the topic schema, in
DataHub types) when given, otherwise from the JSON values.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import functions as F

from cdc_ingest.contract import DELETE, NOOP, UPSERT, ColumnType, TypeHint
from cdc_ingest.formats.base import Message, MessageDecoder, unknown
from cdc_ingest.formats.common import PLAIN_JSON_OPTIONS, number, parse_error

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SEQUENCE, OPERATION, EXECUTE_TIME, SOURCE_TABLE, BEFORE, AFTER = (
    "_sequence_id_",
    "_operation_type_",
    "_excute_time_",
    "_source_table_",
    "_before_image_",
    "_after_image_",
)
METADATA = (SEQUENCE, OPERATION, EXECUTE_TIME, SOURCE_TABLE, BEFORE, AFTER)
SHAPE = "a JSON object with the topic's columns and _operation_type_, _source_table_…"
# The metadata worth keeping, under the product's own column prefix.
SEQUENCE_COLUMN, EXECUTE_TIME_COLUMN = "_cdc_sequence_id", "_cdc_execute_time"
META_TYPES = {
    SEQUENCE_COLUMN: ColumnType("bigint"),
    EXECUTE_TIME_COLUMN: ColumnType("timestamp", "epoch_millis"),
}
HINT = "datahub-tuple"

# DataHub field types (the topic schema) -> column types. TIMESTAMP is epoch microseconds.
DATAHUB_TYPES = {
    "BIGINT": ColumnType("bigint"),
    "INTEGER": ColumnType("bigint"),
    "SMALLINT": ColumnType("bigint"),
    "TINYINT": ColumnType("bigint"),
    "DOUBLE": ColumnType("double"),
    "FLOAT": ColumnType("double"),
    "DECIMAL": ColumnType("decimal(38,18)"),
    "BOOLEAN": ColumnType("boolean"),
    "STRING": ColumnType("string"),
    "TIMESTAMP": ColumnType("timestamp", "epoch_micros"),
}
_DECIMAL = re.compile(r"^DECIMAL\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)$")


def datahub_column_type(type_name: str) -> ColumnType:
    """The column type for a DataHub field type (``DECIMAL(p,s)`` included)."""
    text = type_name.strip().upper()
    match = _DECIMAL.match(text)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2) or 0)
        return ColumnType(f"decimal({min(precision, 38)},{min(scale, precision, 38)})")
    return DATAHUB_TYPES.get(text, ColumnType("string"))


class DataHubTupleDecoder(MessageDecoder):
    """DataHub Tuple records as JSON objects."""

    name: ClassVar[str] = "datahub-tuple"
    image_json_paths: ClassVar[tuple[str, ...]] = ("$",)
    own_columns: ClassVar[frozenset[str]] = frozenset({SEQUENCE_COLUMN, EXECUTE_TIME_COLUMN})

    def parse(self, records: DataFrame) -> DataFrame:
        # A flat object of strings: a line that is not one parses to null.
        return records.withColumn(
            "_m", F.from_json(F.col("value"), "map<string,string>", PLAIN_JSON_OPTIONS)
        )

    def message(self, m: Column, value: Column) -> Message:

        def meta(name: str) -> Column:
            return F.element_at(m, F.lit(name))

        op = meta(OPERATION)
        before, after = F.upper(meta(BEFORE)), F.upper(meta(AFTER))
        kind = (
            F.when(F.upper(op) == "I", F.lit(UPSERT))
            .when(F.upper(op) == "D", F.lit(DELETE))
            .when((F.upper(op) == "U") & (after == "Y"), F.lit(UPSERT))
            .when((F.upper(op) == "U") & (before == "Y"), F.lit(NOOP))
        )
        execute_ms = meta(EXECUTE_TIME).cast("bigint")
        kept = F.map_filter(
            F.create_map(
                F.lit(SEQUENCE_COLUMN),
                meta(SEQUENCE),
                F.lit(EXECUTE_TIME_COLUMN),
                meta(EXECUTE_TIME),
            ),
            lambda _, v: v.isNotNull(),
        )
        columns = F.map_filter(m, lambda k, _: ~k.isin(*METADATA, *META_TYPES))
        return Message(
            op=op,
            kind=kind,
            table=meta(SOURCE_TABLE),
            order=F.array(number(meta(SEQUENCE)), number(execute_ms)),
            image=F.map_concat(kept, columns),
            schema_hint=F.lit(HINT),
            event_ms=execute_ms,
            problems=[
                (m.isNull(), parse_error(value, self.name, SHAPE)),
                (op.isNull(), F.lit(f"record has no {OPERATION}")),
                (
                    kind.isNull(),
                    unknown(
                        OPERATION,
                        op,
                        F.concat(
                            F.lit(f" with {BEFORE}="),
                            F.coalesce(before, F.lit("null")),
                            F.lit(f", {AFTER}="),
                            F.coalesce(after, F.lit("null")),
                            F.lit(" (expected I, U or D)"),
                        ),
                    ),
                ),
                (meta(SOURCE_TABLE).isNull(), F.lit(f"record has no {SOURCE_TABLE}")),
            ],
        )

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        if schema_hint != HINT:
            return None
        configured = self.options.get("columns") or {}
        columns = {name: datahub_column_type(t) for name, t in configured.items()}
        return TypeHint(columns={**META_TYPES, **columns})
