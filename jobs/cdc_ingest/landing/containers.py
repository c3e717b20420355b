"""Avro and Parquet landing files (``file_format: avro | parquet``) to records.

Kafka Connect's S3 sinks (Confluent's, Aiven's) write one container file per topic partition and
flush, named ``<topic>+<partition>+<startOffset>.<ext>``, each record a message value with the
writer schema in the file. ``container_sources`` reads them (Spark's Avro and Parquet sources,
or Python workers for S3 objects) with each record's position in its file; each record becomes
the JSON text its JSON form would carry (``to_json``), so the formats' decoders apply unchanged,
and its Kafka offset is the file's start offset plus its position. A record's key, where the
sink stored it in a keys companion file, is the record's Kafka key.

A format whose messages may embed a Kafka Connect schema (Debezium's) gets one derived from the
file's writer schema (Avro's own, or the ``parquet.avro.schema`` that parquet-avro writers keep):
``{"schema": ..., "payload": ...}``, so that Connect's logical types (``io.debezium.time.Date``,
``MicroTimestamp``, ``Decimal``) type the columns as the JSON converter's schema would. Values
Spark reads as dates and timestamps (Avro's and Parquet's logical types) are written back as the
epoch numbers Connect's JSON holds for them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_ingest.landing.container_sources import (
    FILE_IDX,
    FILE_NAME,
    LINE,
    container_frames,
    container_head,
    exists,
)
from cdc_ingest.landing.reader import ONE_FILE_PER_PARTITION
from cdc_ingest.landing.zones import LandedFile, S3Access, companion_uri, s3_client, s3_etag

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# topic+partition+startOffset.avro, as Confluent's and Aiven's S3 sinks name their files.
# Groups: topic, partition, start offset (Java's regex syntax, as Spark's regexp_extract reads it).
CONNECT_FILE_NAME = r"^(.+)\+(\d+)\+(\d+)\.\w+$"
_AVRO_PRIMITIVES = {
    "int": "int32",
    "long": "int64",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
    "fixed": "bytes",
    "enum": "string",
}
_LOGICAL_NAMES = {
    "date": "org.apache.kafka.connect.data.Date",
    "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
    "decimal": "org.apache.kafka.connect.data.Decimal",
}


def writer_schema(uri: str, file_format: str, s3: S3Access | None = None) -> dict[str, Any] | None:
    """The Avro schema a file was written with (Parquet: parquet-avro's copy), or None."""
    text = container_head(uri, file_format, s3)[1]
    parsed = json.loads(text) if text else None
    return parsed if isinstance(parsed, dict) else None


def connect_schema(avro: Any, field: str | None = None) -> dict[str, Any]:
    """The Kafka Connect schema (as the JSON converter embeds it) of an Avro schema."""
    optional = False
    if isinstance(avro, list):  # a union: ["null", X] is an optional X
        branches = [b for b in avro if b != "null"]
        optional = len(branches) < len(avro)
        avro = branches[0] if len(branches) == 1 else "string"
    if isinstance(avro, str):
        avro = {"type": avro}
    kind = avro.get("type")
    schema: dict[str, Any]
    if kind == "record":
        schema = {
            "type": "struct",
            "fields": [connect_schema(f["type"], f["name"]) for f in avro.get("fields", [])],
        }
    elif kind == "array":
        schema = {"type": "array", "items": connect_schema(avro.get("items"))}
    elif kind == "map":
        schema = {"type": "map", "values": connect_schema(avro.get("values"))}
    elif isinstance(kind, dict | list):
        schema = connect_schema(kind)
    else:
        schema = {"type": avro.get("connect.type") or _AVRO_PRIMITIVES.get(str(kind), "string")}
    name = avro.get("connect.name") or _LOGICAL_NAMES.get(str(avro.get("logicalType")))
    if name:
        schema["name"] = name
    parameters = dict(avro.get("connect.parameters") or {})
    if avro.get("logicalType") == "decimal":
        parameters.setdefault("scale", str(avro.get("scale", 0)))
        parameters.setdefault("connect.decimal.precision", str(avro.get("precision", 38)))
    if parameters:
        schema["parameters"] = parameters
    schema["optional"] = optional
    if field is not None:
        schema["field"] = field
    return schema


def _as_connect_json(column: Column, data_type: T.DataType) -> Column | None:
    """``column`` with dates as epoch days and timestamps as epoch millis (Connect's JSON), or
    None when nothing inside it needs converting."""
    if isinstance(data_type, T.DateType):
        return F.datediff(column, F.lit("1970-01-01").cast("date"))
    if isinstance(data_type, T.TimestampType | T.TimestampNTZType):
        return F.unix_millis(column.cast("timestamp"))
    if isinstance(data_type, T.StructType):
        converted = [_as_connect_json(column.getField(f.name), f.dataType) for f in data_type]
        if all(c is None for c in converted):
            return None
        fields = [
            (column.getField(f.name) if c is None else c).alias(f.name)
            for f, c in zip(data_type.fields, converted, strict=True)
        ]
        return F.when(column.isNotNull(), F.struct(*fields))
    return None


def _records(frame: DataFrame, schema_json: str | None) -> DataFrame:
    """A container frame's records as ``to_records`` columns: the JSON each record's JSON form
    carries and its Kafka coordinates."""
    own = [f for f in frame.schema.fields if f.name not in (FILE_IDX, LINE, FILE_NAME)]
    record = F.struct(
        *[(_as_connect_json(F.col(f.name), f.dataType) or F.col(f.name)).alias(f.name) for f in own]
    )
    payload = F.to_json(record)
    value = (
        F.concat(F.lit('{"schema":' + schema_json + ',"payload":'), payload, F.lit("}"))
        if schema_json is not None
        else payload
    )
    file_name = F.col(FILE_NAME)
    name = F.regexp_extract(file_name, CONNECT_FILE_NAME, 0)
    coordinates = {
        part: F.regexp_extract(file_name, CONNECT_FILE_NAME, group)
        for part, group in (("topic", 1), ("partition", 2), ("offset", 3))
    }
    line = F.col(LINE)
    return frame.select(
        F.col(FILE_IDX),
        line,
        value.alias("raw"),
        F.lit(None).cast("string").alias("key"),
        value.alias("value"),
        F.when(name != "", coordinates["topic"]).alias("kafka_topic"),
        F.when(name != "", coordinates["partition"].cast("int")).alias("kafka_partition"),
        F.when(name != "", coordinates["offset"].cast("bigint") + line - 1).alias("kafka_offset"),
        F.lit(None).cast("bigint").alias("kafka_timestamp"),
        F.lit(None).cast("string").alias("read_error"),
    )


def _keys(frame: DataFrame, file_format: str, schema: dict[str, Any] | None) -> DataFrame:
    """A keys companion's records as the key text each record's JSON form carries: a struct's
    JSON object, a primitive's text (Parquet companions wrap the key in a ``key`` field)."""
    own = [f for f in frame.schema.fields if f.name not in (FILE_IDX, LINE, FILE_NAME)]
    if file_format == "parquet" and [f.name for f in own] == ["key"]:
        column, data_type = F.col("key"), own[0].dataType
    elif len(own) == 1 and (schema or {}).get("type") != "record":
        column, data_type = F.col(own[0].name), own[0].dataType
    else:
        data_type = T.StructType(own)
        column = F.struct(*[F.col(f.name) for f in own])
    if isinstance(data_type, T.StructType):
        key = F.to_json(_as_connect_json(column, data_type) or column)
    else:
        key = column.cast("string")
    return frame.select(F.col(FILE_IDX), F.col(LINE), key.alias("_cdc_kafka_key"))


def read_container_records(
    spark: SparkSession,
    files: Sequence[str | LandedFile],
    file_format: str,
    embed_connect_schema: bool,
    leave_out: Sequence[int] = (),
) -> DataFrame:
    """Every record of the given Avro or Parquet files, with the columns of ``to_records``.

    ``embed_connect_schema`` wraps each record with the Connect schema of its file's writer
    schema (see the module's docstring). A file with a keys companion (``t+0+42.keys.avro``,
    Confluent's ``store.kafka.keys``) gives each record the key stored for it.
    """
    for key, setting in ONE_FILE_PER_PARTITION.items():
        spark.conf.set(key, setting)
    landed = [f if isinstance(f, LandedFile) else LandedFile(f, 0) for f in files]
    chosen = [
        (idx, f.uri, s3_etag(f.fingerprint)) for idx, f in enumerate(landed) if idx not in leave_out
    ]
    if not chosen:
        return spark.createDataFrame(
            [],
            "_cdc_file_idx int, _cdc_line bigint, raw string, key string, value string, "
            "kafka_topic string, kafka_partition int, kafka_offset bigint, "
            "kafka_timestamp bigint, read_error string",
        )
    parts = []
    for frame, schema in container_frames(spark, chosen, file_format):
        envelope = None
        if embed_connect_schema and schema is not None:
            envelope = json.dumps(connect_schema(schema), separators=(",", ":"))
        parts.append(_records(frame, envelope))
    records = functools.reduce(DataFrame.unionByName, parts)
    on_s3 = any(uri.startswith("s3://") for _, uri, _ in chosen)
    client = s3_client(S3Access.from_env()) if on_s3 else None
    companions = [
        (idx, key_uri, None)
        for idx, uri, _ in chosen
        if exists(key_uri := companion_uri(uri, ".keys"), client)
    ]
    if not companions:
        return records
    keys = functools.reduce(
        DataFrame.unionByName,
        [
            _keys(frame, file_format, schema)
            for frame, schema in container_frames(spark, companions, file_format)
        ],
    )
    columns = records.columns
    joined = records.join(keys, [FILE_IDX, LINE], "left")
    return joined.select(
        *[
            F.coalesce("_cdc_kafka_key", "key").alias("key") if c == "key" else F.col(c)
            for c in columns
        ]
    )
