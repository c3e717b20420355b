"""Alibaba Lindorm change streams (seed 000): Debezium 2.0 envelopes from SQL and HBase tables.

Messages never name the key: SQL tables take it from the pipeline's ``keys``; HBase tables are keyed
by ``ROW``, and all their cells (row key included) are Base64 bytes. A "column delete" is an update
whose ``after`` omits the column: images are full, so the column becomes NULL.
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import ColumnType, TypeHint
from cdc_ingest.formats.common import number
from cdc_ingest.formats.debezium import DebeziumFamilyDecoder

HBASE_ROW_KEY = "ROW"
HBASE_HINT = "lindorm:hbase"


class LindormDecoder(DebeziumFamilyDecoder):
    """Lindorm SQL and HBase table changes."""

    name: ClassVar[str] = "lindorm"
    schema_field: ClassVar[str] = "namespace"
    statements_apart: ClassVar[bool] = False

    def order(self, source: Column, envelope_ts: Column, statement: Column | None = None) -> Column:
        return F.array(number(source.getItem("ts_ms")), number(envelope_ts))

    def message_keys(self, image: Column) -> tuple[Column, Column]:
        is_hbase = F.map_contains_key(image, HBASE_ROW_KEY)
        names = F.when(is_hbase, F.array(F.lit(HBASE_ROW_KEY)))
        return names, F.lit(None).cast("map<string,string>")

    def schema_hint(self, envelope_schema: Column, image: Column) -> Column:
        return F.when(F.map_contains_key(image, HBASE_ROW_KEY), F.lit(HBASE_HINT)).otherwise(
            super().schema_hint(envelope_schema, image)
        )

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        if schema_hint == HBASE_HINT:
            return TypeHint({}, default=ColumnType("binary", "base64"))
        return super().type_hint(schema_hint)
