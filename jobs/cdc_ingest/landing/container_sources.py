"""Where the records of Avro and Parquet landing files come from: Spark's own Avro and Parquet
sources for local files, Arrow-batched Python workers (boto3, then fastavro or pyarrow) for S3
objects, into the same columns (the record's own, after ``_cdc_file_idx``, ``_cdc_line`` and
``_cdc_file_name``).

The Python workers give a file's records the Spark types Spark's own source would (Avro's through
Spark's ``SchemaConverters``, Parquet's from the footer's Arrow schema), so that what follows in
``containers`` does not depend on where a file landed. Of an S3 object the driver reads only the
header (Avro) or footer (Parquet), for the writer schema.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_ingest import spark_jvm
from cdc_ingest.landing.reader import ARROW_BATCH_LINES
from cdc_ingest.landing.zones import S3Access, read_bytes, s3_client, s3_head

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

# Local files are one per partition: a record's row in its partition is its position in its file.
_ROW_BITS = 33
_HEAD_BYTES = 1 << 16
# The columns a container source adds to each record's own.
FILE_IDX, LINE, FILE_NAME = "_cdc_file_idx", "_cdc_line", "_cdc_file_name"


def container_head(uri: str, file_format: str, s3: S3Access | None) -> tuple[Any, str | None]:
    """A file's Parquet footer (``pq.FileMetaData``; None for Avro) and Avro writer schema text
    (Parquet: parquet-avro's copy, if kept). Only the file's header or footer is read."""
    if file_format == "avro":
        import fastavro

        size = _HEAD_BYTES
        while True:  # the header (magic, metadata map, sync marker) is read whole or not at all
            head = read_bytes(uri, s3, byte_range=f"bytes=0-{size - 1}")
            try:
                return None, fastavro.reader(io.BytesIO(head)).metadata.get("avro.schema")
            except Exception:
                if len(head) < size:
                    raise
                size *= 16
    import pyarrow.parquet as pq

    # The footer's length is in the 8 bytes before the trailing magic.
    tail = read_bytes(uri, s3, byte_range="bytes=-8")
    footer = read_bytes(uri, s3, byte_range=f"bytes=-{int.from_bytes(tail[:4], 'little') + 8}")
    metadata = pq.read_metadata(io.BytesIO(footer))
    raw = (metadata.metadata or {}).get(b"parquet.avro.schema")
    return metadata, raw.decode("utf-8") if raw else None


def _local_frame(spark: SparkSession, files: list[tuple[int, str]], file_format: str) -> DataFrame:
    """Local files sharing one writer schema, read by Spark's own source, one file per partition
    (so that a record's row in its partition is its position in its file)."""
    paths, file_index = [], []
    for idx, uri in files:
        path = unquote(urlparse(uri).path)
        paths.append(path)
        file_index += [F.lit(spark_jvm.hadoop_uri(spark, uri, local_path=path)), F.lit(idx)]
    # Parquet files without a writer schema of their own are read with their columns merged.
    frame = spark.read.format(file_format).option("mergeSchema", "true").load(paths)
    partition_base = F.spark_partition_id().cast("bigint") * (1 << _ROW_BITS)
    scanned = F.col("_metadata.file_path")
    unknown = F.raise_error(F.concat(F.lit("read a file the batch does not name: "), scanned))
    return frame.select(
        F.coalesce(F.element_at(F.create_map(*file_index), scanned), unknown)
        .cast("int")
        .alias(FILE_IDX),
        (F.monotonically_increasing_id() - partition_base + 1).alias(LINE),
        F.col("_metadata.file_name").alias(FILE_NAME),
        *frame.columns,
    )


def _spark_schema(spark: SparkSession, file_format: str, footer: Any, avro: str | None) -> Any:
    """The Spark schema Spark's own source gives a file of this writer schema (or footer)."""
    if file_format == "parquet":
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(footer.schema.to_arrow_schema())
    assert avro is not None
    return spark_jvm.avro_sql_type(spark, avro)


def _container_batches(
    tasks: Iterable[pa.RecordBatch], file_format: str, schema: pa.Schema, s3: S3Access
) -> Iterator[pa.RecordBatch]:
    """Each S3 object of ``tasks`` (file_idx, uri, etag) decoded to Arrow batches of ``schema``
    (its record columns after file index, position and file name)."""
    import pyarrow as pa

    record_schema = pa.schema(list(schema)[3:])
    for task in tasks:
        columns = (task.column(n).to_pylist() for n in ("file_idx", "uri", "etag"))
        for file_idx, uri, etag in zip(*columns, strict=True):
            data = io.BytesIO(read_bytes(uri, s3, etag))
            if file_format == "avro":
                import fastavro

                table = pa.Table.from_pylist(list(fastavro.reader(data)), schema=record_schema)
            else:
                import pyarrow.parquet as pq

                table = pq.read_table(data).select(record_schema.names).cast(record_schema)
            name = unquote(urlparse(uri).path).rsplit("/", 1)[-1]
            for offset, batch in enumerate(table.to_batches(max_chunksize=ARROW_BATCH_LINES)):
                first = offset * ARROW_BATCH_LINES + 1
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([file_idx] * batch.num_rows, pa.int32()),
                        pa.array(range(first, first + batch.num_rows), pa.int64()),
                        pa.array([name] * batch.num_rows, pa.string()),
                        *batch.columns,
                    ],
                    schema=schema,
                )


def _s3_frame(
    spark: SparkSession,
    files: list[tuple[int, str, str | None]],
    file_format: str,
    record_type: Any,
) -> DataFrame:
    """S3 objects sharing one writer schema, read by Arrow-batched Python workers (boto3, then
    fastavro or pyarrow), one task per object; their columns are those Spark's own source gives."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = T.StructType(
        [
            T.StructField(FILE_IDX, T.IntegerType()),
            T.StructField(LINE, T.LongType()),
            T.StructField(FILE_NAME, T.StringType()),
            *record_type.fields,
        ]
    )
    arrow_schema = to_arrow_schema(schema)
    s3 = S3Access.from_env()  # travels inside the task's function, as for JSON lines

    def batches(tasks: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _container_batches(tasks, file_format, arrow_schema, s3)

    plan = spark.createDataFrame(files, "file_idx int, uri string, etag string").repartition(
        len(files)
    )
    return plan.mapInArrow(batches, schema)


def exists(uri: str, client: Any = None) -> bool:
    """Whether a file is there (an S3 object: asked with ``client``)."""
    if not uri.startswith("s3://"):
        return Path(unquote(urlparse(uri).path)).is_file()
    return s3_head(uri, client or s3_client(S3Access.from_env())) is not None


def container_frames(
    spark: SparkSession, files: Sequence[tuple[int, str, str | None]], file_format: str
) -> list[tuple[DataFrame, dict[str, Any] | None]]:
    """The files' records in groups of one writer schema (a source's schema changes between
    files), each group with that schema: local files read by Spark's own source, S3 objects by
    Python workers into the same columns."""
    groups: dict[str, list[tuple[int, str, str | None]]] = {}
    heads: dict[str, tuple[Any, str | None]] = {}
    for idx, uri, etag in files:
        footer, avro = container_head(uri, file_format, None)
        on_s3 = uri.startswith("s3://")
        shape = str(footer.schema.to_arrow_schema()) if on_s3 and footer is not None else ""
        group = json.dumps([on_s3, avro and json.loads(avro), shape], sort_keys=True)
        heads[group] = (footer, avro)
        groups.setdefault(group, []).append((idx, uri, etag))
    frames = []
    for group, members in groups.items():
        footer, avro = heads[group]
        if members[0][1].startswith("s3://"):
            record_type = _spark_schema(spark, file_format, footer, avro)
            frame = _s3_frame(spark, members, file_format, record_type)
        else:
            frame = _local_frame(spark, [(i, u) for i, u, _ in members], file_format)
        schema = json.loads(avro) if avro else None
        frames.append((frame, schema if isinstance(schema, dict) else None))
    return frames
