"""Avro and Parquet landing files (``file_format: avro | parquet``) to records.

Kafka Connect's S3 sinks (Confluent's, Aiven's) write one container file per topic partition and
flush, named ``<topic>+<partition>+<startOffset>.<ext>``, each record a message value with the
writer schema in the file. Spark's Avro and Parquet sources read them, one file per partition so
that a record's position in its file is its row in the partition; each record becomes the JSON
text its JSON form would carry (``to_json``), so the formats' decoders apply unchanged, and its
Kafka offset is the file's start offset plus its position.

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
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_ingest.landing.reader import ONE_FILE_PER_PARTITION
from cdc_ingest.landing.zones import LandedFile

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# topic+partition+startOffset.avro, as Confluent's and Aiven's S3 sinks name their files.
# Groups: topic, partition, start offset (Java's regex syntax, as Spark's regexp_extract reads it).
CONNECT_FILE_NAME = r"^(.+)\+(\d+)\+(\d+)\.\w+$"
_ROW_BITS = 33
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


def writer_schema(path: str, file_format: str) -> dict[str, Any] | None:
    """The Avro schema a file was written with (Parquet: parquet-avro's copy), or None."""
    if file_format == "avro":
        import fastavro

        with open(path, "rb") as handle:
            text = fastavro.reader(handle).metadata.get("avro.schema")
    else:
        import pyarrow.parquet as pq

        metadata = pq.read_metadata(path).metadata or {}
        raw = metadata.get(b"parquet.avro.schema")
        text = raw.decode("utf-8") if raw else None
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


def _read_group(
    spark: SparkSession,
    files: list[tuple[int, str]],
    file_format: str,
    schema_json: str | None,
) -> DataFrame:
    """Files sharing one writer schema, as records."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    paths, file_index = [], []
    for idx, uri in files:
        path = unquote(urlparse(uri).path)
        paths.append(path)
        hadoop_uri = jvm.org.apache.hadoop.fs.Path(jvm.java.io.File(path).toURI()).toUri()
        file_index += [F.lit(hadoop_uri.toString()), F.lit(idx)]
    # Parquet files without a writer schema of their own are read with their columns merged.
    frame = spark.read.format(file_format).option("mergeSchema", "true").load(paths)
    partition_base = F.spark_partition_id().cast("bigint") * (1 << _ROW_BITS)
    scanned = F.col("_metadata.file_path")
    unknown = F.raise_error(F.concat(F.lit("read a file the batch does not name: "), scanned))
    record = F.struct(
        *[
            (_as_connect_json(F.col(f.name), f.dataType) or F.col(f.name)).alias(f.name)
            for f in frame.schema.fields
        ]
    )
    payload = F.to_json(record)
    value = (
        F.concat(F.lit('{"schema":' + schema_json + ',"payload":'), payload, F.lit("}"))
        if schema_json is not None
        else payload
    )
    name = F.regexp_extract(F.col("_metadata.file_name"), CONNECT_FILE_NAME, 0)
    coordinates = {
        part: F.regexp_extract(F.col("_metadata.file_name"), CONNECT_FILE_NAME, group)
        for part, group in (("topic", 1), ("partition", 2), ("offset", 3))
    }
    line = F.monotonically_increasing_id() - partition_base + 1
    return frame.select(
        F.coalesce(F.element_at(F.create_map(*file_index), scanned), unknown)
        .cast("int")
        .alias("_cdc_file_idx"),
        line.alias("_cdc_line"),
        value.alias("raw"),
        F.lit(None).cast("string").alias("key"),
        value.alias("value"),
        F.when(name != "", coordinates["topic"]).alias("kafka_topic"),
        F.when(name != "", coordinates["partition"].cast("int")).alias("kafka_partition"),
        F.when(name != "", coordinates["offset"].cast("bigint") + line - 1).alias("kafka_offset"),
        F.lit(None).cast("bigint").alias("kafka_timestamp"),
        F.lit(None).cast("string").alias("read_error"),
    )


def read_container_records(
    spark: SparkSession,
    files: Sequence[str | LandedFile],
    file_format: str,
    embed_connect_schema: bool,
    leave_out: Sequence[int] = (),
) -> DataFrame:
    """Every record of the given Avro or Parquet files, with the columns of ``to_records``.

    Files are read in groups of one writer schema (a source's schema changes between files);
    ``embed_connect_schema`` wraps each record with the Connect schema of its file's writer
    schema (see the module's docstring).
    """
    for key, setting in ONE_FILE_PER_PARTITION.items():
        spark.conf.set(key, setting)
    uris = [f.uri if isinstance(f, LandedFile) else f for f in files]
    groups: dict[str, list[tuple[int, str]]] = {}
    schemas: dict[str, dict[str, Any] | None] = {}
    for idx, uri in enumerate(uris):
        if idx in leave_out:
            continue
        schema = writer_schema(unquote(urlparse(uri).path), file_format)
        text = json.dumps(schema, sort_keys=True)
        schemas[text] = schema
        groups.setdefault(text, []).append((idx, uri))
    parts = []
    for text, group in groups.items():
        schema = schemas[text]
        envelope = None
        if embed_connect_schema and schema is not None:
            envelope = json.dumps(connect_schema(schema), separators=(",", ":"))
        parts.append(_read_group(spark, group, file_format, envelope))
    if not parts:
        return spark.createDataFrame(
            [],
            "_cdc_file_idx int, _cdc_line bigint, raw string, key string, value string, "
            "kafka_topic string, kafka_partition int, kafka_offset bigint, "
            "kafka_timestamp bigint, read_error string",
        )
    return functools.reduce(DataFrame.unionByName, parts)
