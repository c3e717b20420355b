"""Generic Debezium JSON, with or without the embedded Connect ``schema``.

Keys come from the pipeline's ``keys`` or, with ``envelope: kafka``, from the Kafka record key
(Debezium keys are the table's primary key struct).
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.formats.debezium import DebeziumFamilyDecoder, kafka_key_values


class DebeziumJsonDecoder(DebeziumFamilyDecoder):
    """Debezium change events as written by the JSON converter."""

    name: ClassVar[str] = "debezium-json"

    def message_keys(self, image: Column) -> tuple[Column, Column]:
        values = kafka_key_values(F.col("key"))
        return F.map_keys(values), values
