"""Arcion Replicant JSON CDC for Kafka (seed 003).

Debezium-shaped values typed by their Connect schema (values may be strings: ``"r_regionkey": "0"``
with type int32). The key is the Kafka record key's payload; a table without one is keyed by the
string ``"default"``, so the pipeline's ``keys`` must name it. Every delete is followed by a
tombstone whose value is the JSON string ``"default"``: it changes nothing.
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.formats.debezium import DebeziumFamilyDecoder, kafka_key_values

TOMBSTONE_VALUE = "default"


class ArcionDecoder(DebeziumFamilyDecoder):
    """Arcion key/value messages."""

    name: ClassVar[str] = "arcion"

    def message_keys(self, image: Column) -> tuple[Column, Column]:
        values = kafka_key_values(F.col("key"))
        return F.map_keys(values), values

    def is_tombstone(self, value: Column) -> Column:
        # With envelope kafka a JSON string value arrives unquoted; a bare line keeps its quotes.
        trimmed = F.trim(value)
        return value.isNull() | trimmed.isin(TOMBSTONE_VALUE, f'"{TOMBSTONE_VALUE}"')
