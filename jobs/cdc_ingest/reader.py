"""Landed files to records: one row per Kafka record, with its file and line.

Files are read by Arrow-batched Python workers (``mapInArrow``), one task per file, because that
keeps exact line numbers (which Spark's text source cannot give), reads gzip and S3 alike, and
costs no per-row Python beyond splitting lines. Everything after that is Spark SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest.landing import S3Access, iter_lines, read_bytes

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

LINES_SCHEMA = "_cdc_file_idx int, _cdc_line bigint, raw string, read_error string"
KAFKA_ENVELOPE_SCHEMA = (
    "topic string, partition string, offset string, timestamp string, key string, value string, "
    "_corrupt string"
)
ARROW_BATCH_LINES = 65536


def _lines_batches(batches: Iterable[pa.RecordBatch], s3: S3Access) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    for batch in batches:
        columns = (batch.column(n).to_pylist() for n in ("file_idx", "uri"))
        for file_idx, uri in zip(*columns, strict=True):
            # An unreadable file fails the run (and the run is retried) rather than being marked
            # applied with nothing read from it.
            data = read_bytes(uri, s3)
            numbered = list(iter_lines(data))
            for start in range(0, len(numbered), ARROW_BATCH_LINES):
                chunk = numbered[start : start + ARROW_BATCH_LINES]
                raw_bytes = pa.array([line for _, line in chunk], pa.binary())
                errors: list[str | None] | None = None
                try:
                    raw = raw_bytes.cast(pa.string())
                except pa.ArrowInvalid:
                    texts: list[str] = []
                    errors = []
                    for _, line in chunk:
                        try:
                            texts.append(line.decode("utf-8"))
                            errors.append(None)
                        except UnicodeDecodeError as exc:
                            texts.append(line.decode("utf-8", errors="replace"))
                            errors.append(
                                f"line is not valid UTF-8 ({exc.reason} at byte {exc.start})"
                            )
                    raw = pa.array(texts, pa.string())
                yield pa.RecordBatch.from_pydict(
                    {
                        "_cdc_file_idx": pa.array([file_idx] * len(chunk), pa.int32()),
                        "_cdc_line": pa.array([n for n, _ in chunk], pa.int64()),
                        "raw": raw,
                        "read_error": pa.array(errors or [None] * len(chunk), pa.string()),
                    }
                )


def read_lines(spark: SparkSession, uris: list[str]) -> DataFrame:
    """Every non-blank line of the given files, with ``_cdc_file_idx`` (index in ``uris``)."""
    # The driver's S3 endpoint and credentials travel inside the task's function (not in the plan's
    # rows or on a command line): executors may not share the driver's environment.
    s3 = S3Access.from_env()

    def lines_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _lines_batches(batches, s3)

    rows = [(i, uri) for i, uri in enumerate(uris)]
    plan = spark.createDataFrame(
        spark.sparkContext.parallelize(rows, max(1, len(rows))), "file_idx int, uri string"
    )
    return plan.mapInArrow(lines_batches, LINES_SCHEMA)


def to_records(lines: DataFrame, envelope: str) -> DataFrame:
    """Split each line into the Kafka record's key, value and coordinates.

    With ``envelope: none`` the line is the value. With ``envelope: kafka`` the line is
    ``{"topic","partition","offset","timestamp","key","value"}``; a key or value that is a JSON
    object arrives as its JSON text, a JSON string as the string itself.
    """
    if envelope == "kafka":
        env = F.from_json(
            "raw",
            KAFKA_ENVELOPE_SCHEMA,
            {"columnNameOfCorruptRecord": "_corrupt", "mode": "PERMISSIVE"},
        )
        with_env = lines.withColumn("_env", env)
        e = F.col("_env")
        envelope_error = F.when(
            F.col("raw").isNotNull() & e.getField("_corrupt").isNotNull(),
            F.when(
                F.get_json_object("raw", "$").isNull(), F.lit("line is not valid JSON")
            ).otherwise(
                F.lit("line is not a Kafka record envelope {topic, partition, offset, key, value}")
            ),
        ).when(
            e.getField("topic").isNull() | e.getField("offset").isNull(),
            F.lit("Kafka record envelope lacks topic or offset"),
        )
        return with_env.select(
            "_cdc_file_idx",
            "_cdc_line",
            "raw",
            e.getField("key").alias("key"),
            e.getField("value").alias("value"),
            e.getField("topic").alias("kafka_topic"),
            e.getField("partition").cast("int").alias("kafka_partition"),
            e.getField("offset").cast("bigint").alias("kafka_offset"),
            e.getField("timestamp").cast("bigint").alias("kafka_timestamp"),
            F.coalesce("read_error", envelope_error).alias("read_error"),
        )
    return lines.select(
        "_cdc_file_idx",
        "_cdc_line",
        "raw",
        F.lit(None).cast("string").alias("key"),
        F.col("raw").alias("value"),
        F.lit(None).cast("string").alias("kafka_topic"),
        F.lit(None).cast("int").alias("kafka_partition"),
        F.lit(None).cast("bigint").alias("kafka_offset"),
        F.lit(None).cast("bigint").alias("kafka_timestamp"),
        "read_error",
    )
