"""Landed files to records: one row per Kafka record, with its file and line.

Large plain local files are read by Spark's text source, one file per partition, so a line's number
is its position inside the partition. Small local files, gzipped files and S3 objects are read by
Arrow-batched Python workers (``mapInArrow``, boto3 in the workers), small ones packed many to a
task (a landing zone of thousands of small files is then a few partitions, not thousands), or,
when they are few bytes in all, by the driver, which hands them to Spark as Arrow: a gzip
stream that is truncated or corrupt becomes one error row for the whole file (line 0, none of its
lines), where Spark's reader would fail the batch or, with ``ignoreCorruptFiles``, keep its first
lines without a word.
Both number lines from 1 counting blank lines, skip blank lines, split on "\n" only, drop a
trailing "\r" and a leading UTF-8 BOM, and flag a line that is not valid UTF-8. Everything after
that is Spark SQL.
"""

from __future__ import annotations

import functools
import gzip
import zlib
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_ingest import spark_jvm, sql_text
from cdc_ingest.arrow_frames import arrow_frame
from cdc_ingest.contract import JSON_MAX_STRING_LENGTH
from cdc_ingest.landing.zones import LandedFile, S3Access, iter_lines, read_bytes, s3_etag
from cdc_ingest.sql_text import literal

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

LINES_SCHEMA = "_cdc_file_idx int, _cdc_line bigint, raw string, read_error string"
KAFKA_ENVELOPE_SCHEMA = (
    "topic string, partition string, offset string, timestamp string, key string, value string, "
    "_corrupt string"
)
ARROW_BATCH_LINES = 65536
# A plain local file smaller than this is read with others in one Python task; a larger one is a
# partition of Spark's text source of its own.
SMALL_FILE_BYTES = 8 << 20
# Python tasks read about this many bytes each (a larger file is a task of its own).
TASK_BYTES = 64 << 20
# Files Python reads that hold at most this many bytes in all (as listed; a gzipped file's
# compressed size) are read by the driver: a Python worker's start and its Arrow round trips
# through the JVM would be a large part of a small batch's CPU.
DRIVER_BYTES = 4 << 20


FILE_ERROR_LINE = 0  # the line number of an error row that stands for a whole file


def _lines_arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("_cdc_file_idx", pa.int32()),
            ("_cdc_line", pa.int64()),
            ("raw", pa.string()),
            ("read_error", pa.string()),
        ]
    )


def _lines_batches(batches: Iterable[pa.RecordBatch], s3: S3Access) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    for batch in batches:
        columns = (batch.column(n).to_pylist() for n in ("file_idx", "uri", "etag"))
        for file_idx, uri, etag in zip(*columns, strict=True):
            # An unreadable file fails the run (and the run is retried) rather than being marked
            # applied with nothing read from it; a corrupt gzip stream is the file's own fault.
            try:
                data = read_bytes(uri, s3, etag)
            except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
                yield pa.RecordBatch.from_pydict(
                    {
                        "_cdc_file_idx": pa.array([file_idx], pa.int32()),
                        "_cdc_line": pa.array([FILE_ERROR_LINE], pa.int64()),
                        "raw": pa.array([None], pa.string()),
                        "read_error": pa.array(
                            [f"file is not a readable gzip stream, none of its lines read: {exc}"],
                            pa.string(),
                        ),
                    }
                )
                continue
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
                            errors.append(f"line is not valid UTF-8 (at byte {exc.start})")
                    raw = pa.array(texts, pa.string())
                yield pa.RecordBatch.from_pydict(
                    {
                        "_cdc_file_idx": pa.array([file_idx] * len(chunk), pa.int32()),
                        "_cdc_line": pa.array([n for n, _ in chunk], pa.int64()),
                        "raw": raw,
                        "read_error": pa.array(errors or [None] * len(chunk), pa.string()),
                    }
                )


# Spark's file sources split large files and pack small ones together; with both limits this
# high every file is one partition (gzip is never split), which the line numbering relies on.
ONE_FILE_PER_PARTITION = {
    "spark.sql.files.maxPartitionBytes": str(1 << 50),
    "spark.sql.files.openCostInBytes": str(1 << 50),
}
# monotonically_increasing_id puts the partition index above the low 33 bits of the row position.
_ROW_BITS = 33
# What Python's bytes.strip() strips: a line of only these is blank.
_BLANK = " \t\n\r\x0b\x0c"
_GLOB_CHARACTERS = "\\[]{}*?"


def read_lines(
    spark: SparkSession,
    files: Sequence[str | LandedFile],
    leave_out: Collection[int] = (),
    driver_bytes: int = DRIVER_BYTES,
) -> DataFrame:
    """Every non-blank line of the given files, with ``_cdc_file_idx`` (index in ``files``).

    Args:
        spark: the session.
        files: URIs, or landed files (an S3 object with an ``etag:`` fingerprint is read only if
            it still has that ETag: a changed object fails the read).
        leave_out: indexes of files not to read.
        driver_bytes: the files Python reads are read by the driver, now, if their listed sizes
            add up to at most this many bytes; else by Python tasks, when Spark runs the plan.

    Raises:
        LandingError: a file the driver reads cannot be read (in a Python task: the job fails).
    """
    landed = [f if isinstance(f, LandedFile) else LandedFile(f, 0) for f in files]
    chosen = [(i, f) for i, f in enumerate(landed) if i not in leave_out]
    by_spark = [(i, f.uri) for i, f in chosen if not _python_read(f)]
    by_python = [(i, f) for i, f in chosen if _python_read(f)]
    parts: list[DataFrame] = []
    if by_spark:
        parts.append(_read_hadoop(spark, by_spark))
    # A size of 0 is unknown (a bare URI), which only the tasks may read.
    sizes = [f.size for _, f in by_python]
    if by_python and min(sizes) > 0 and sum(sizes) <= driver_bytes:
        parts.append(_read_in_driver(spark, by_python))
    elif by_python:
        parts.append(_read_python(spark, by_python))
    if not parts:
        return spark.createDataFrame([], LINES_SCHEMA)
    return functools.reduce(DataFrame.unionByName, parts)


def _python_read(landed: LandedFile) -> bool:
    uri = landed.uri
    small = 0 < landed.size < SMALL_FILE_BYTES
    return uri.startswith("s3://") or uri.lower().endswith(".gz") or small


def _tasks(
    files: list[tuple[int, LandedFile]], parallelism: int
) -> list[list[tuple[int, LandedFile]]]:
    """The files per task, in order: consecutive files of about :data:`TASK_BYTES` together, and
    at least ``parallelism`` tasks when there are that many files."""
    total = sum(max(f.size, 1) for _, f in files)
    target = max(1, min(TASK_BYTES, total // max(1, parallelism)))
    tasks: list[list[tuple[int, LandedFile]]] = [[]]
    filled = 0
    for item in files:
        size = max(item[1].size, 1)
        if tasks[-1] and filled + size > target:
            tasks.append([])
            filled = 0
        tasks[-1].append(item)
        filled += size
    return tasks


def _read_hadoop(spark: SparkSession, files: list[tuple[int, str]]) -> DataFrame:
    """Files of any Hadoop filesystem (``file://``; ``s3a://`` in scripts/bench_s3_landing.py)
    through Spark's text source."""
    for key, setting in ONE_FILE_PER_PARTITION.items():
        spark.conf.set(key, setting)
    paths: list[str] = []
    file_index: list[Column] = []
    for idx, uri in files:
        parsed = urlparse(uri)
        path = unquote(parsed.path)
        # The text source globs its paths; a landed name may hold glob characters.
        escaped = "".join("\\" + c if c in _GLOB_CHARACTERS else c for c in path)
        if parsed.scheme in ("", "file"):
            paths.append("file://" + escaped)
            # The scan's _metadata.file_path is the file's URI as Hadoop encodes it.
            hadoop_uri = spark_jvm.hadoop_uri(spark, uri, local_path=path)
        else:
            paths.append(f"{parsed.scheme}://{parsed.netloc}{escaped}")
            hadoop_uri = spark_jvm.hadoop_uri(spark, uri)
        file_index += [F.lit(hadoop_uri), F.lit(idx)]
    text = spark.read.option("lineSep", "\n").text(paths)
    partition_base = F.spark_partition_id().cast("bigint") * (1 << _ROW_BITS)
    # Numbered right on top of the scan, before any filter, so that every line counts.
    scanned = F.col("_metadata.file_path")
    # A file the mapping misses would lose its lines' file: fail the run instead.
    unknown = F.raise_error(F.concat(F.lit("read a file the batch does not name: "), scanned))
    numbered = text.select(
        F.coalesce(F.element_at(F.create_map(*file_index), scanned), unknown)
        .cast("int")
        .alias("_cdc_file_idx"),
        (F.monotonically_increasing_id() - partition_base + 1).alias("_cdc_line"),
        "value",
    )
    value = F.col("value")
    # The text source passes the bytes through unchecked: invalid UTF-8 does not survive a
    # round trip through a Java string.
    invalid = value.cast("binary") != F.encode(value, "UTF-8")
    decoded = F.decode(value.cast("binary"), "UTF-8")
    # Bytes before the first replacement character: where the invalid sequence starts.
    bad_byte = F.octet_length(F.substring_index(decoded, "\ufffd", 1))
    stripped = F.when(value.endswith("\r"), F.regexp_replace(value, "\r+$", "")).otherwise(value)
    # Most lines start with a character that is not blank: only the others are trimmed.
    blank = F.ascii(value).isin(*(ord(c) for c in _BLANK), 0) & (
        F.length(F.btrim(value, F.lit(_BLANK))) == 0
    )
    return numbered.where(~blank).select(
        "_cdc_file_idx",
        "_cdc_line",
        F.when(invalid, F.regexp_replace(decoded, "\r+$", "")).otherwise(stripped).alias("raw"),
        F.when(
            invalid,
            F.concat(F.lit("line is not valid UTF-8 (at byte "), bad_byte, F.lit(")")),
        ).alias("read_error"),
    )


def _read_python(spark: SparkSession, files: list[tuple[int, LandedFile]]) -> DataFrame:
    """Small files, gzipped files and S3 objects through Arrow-batched Python workers, packed
    into tasks of about :data:`TASK_BYTES`."""
    # The driver's S3 endpoint and credentials travel inside the task's function (not in the plan's
    # rows or on a command line): executors may not share the driver's environment.
    s3 = S3Access.from_env()

    def lines_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _lines_batches(batches, s3)

    tasks = [
        [(i, f.uri, s3_etag(f.fingerprint)) for i, f in group]
        for group in _tasks(files, spark.sparkContext.defaultParallelism)
    ]
    # parallelize splits a list into slices by position only: each task's files are one element,
    # flattened inside its own partition.
    plan = spark.createDataFrame(
        spark.sparkContext.parallelize(tasks, len(tasks)).flatMap(lambda task: task),
        "file_idx int, uri string, etag string",
    )
    return plan.mapInArrow(lines_batches, LINES_SCHEMA)


def _read_in_driver(spark: SparkSession, files: list[tuple[int, LandedFile]]) -> DataFrame:
    """Files of few bytes in all, read by the driver as the Python tasks would read them."""
    import pyarrow as pa

    listed = pa.RecordBatch.from_pydict(
        {
            "file_idx": pa.array([i for i, _ in files], pa.int32()),
            "uri": pa.array([f.uri for _, f in files], pa.string()),
            "etag": pa.array([s3_etag(f.fingerprint) for _, f in files], pa.string()),
        }
    )
    schema = _lines_arrow_schema()
    batches = list(_lines_batches([listed], S3Access.from_env()))
    return arrow_frame(spark, pa.Table.from_batches(batches, schema), LINES_SCHEMA)


def to_records(lines: DataFrame, envelope: str) -> DataFrame:
    """Split each line into the Kafka record's key, value and coordinates.

    With ``envelope: none`` the line is the value. With ``envelope: kafka`` the line is
    ``{"topic","partition","offset","timestamp","key","value"}``; a key or value that is a JSON
    object arrives as its JSON text, a JSON string as the string itself.
    """
    if envelope == "kafka":
        options = (
            "map('columnNameOfCorruptRecord', '_corrupt', 'mode', 'PERMISSIVE',"
            f" 'maxStringLen', '{JSON_MAX_STRING_LENGTH}')"
        )
        with_env = sql_text.select(
            lines, ["*", f"from_json(raw, {literal(KAFKA_ENVELOPE_SCHEMA)}, {options}) AS _env"]
        )
        not_envelope = literal(
            "line is not a Kafka record envelope {topic, partition, offset, key, value}"
        )
        envelope_error = (
            "CASE WHEN raw IS NOT NULL AND _env.`_corrupt` IS NOT NULL THEN"
            " CASE WHEN get_json_object(raw, '$') IS NULL THEN 'line is not valid JSON'"
            f" ELSE {not_envelope} END"
            " WHEN _env.`topic` IS NULL OR _env.`offset` IS NULL"
            " THEN 'Kafka record envelope lacks topic or offset' END"
        )
        return sql_text.select(
            with_env,
            [
                "_cdc_file_idx",
                "_cdc_line",
                "raw",
                "_env.`key` AS key",
                "_env.`value` AS value",
                "_env.`topic` AS kafka_topic",
                "CAST(_env.`partition` AS INT) AS kafka_partition",
                "CAST(_env.`offset` AS BIGINT) AS kafka_offset",
                "CAST(_env.`timestamp` AS BIGINT) AS kafka_timestamp",
                f"coalesce(read_error, {envelope_error}) AS read_error",
            ],
        )
    return sql_text.select(
        lines,
        [
            "_cdc_file_idx",
            "_cdc_line",
            "raw",
            "CAST(NULL AS STRING) AS key",
            "raw AS value",
            "CAST(NULL AS STRING) AS kafka_topic",
            "CAST(NULL AS INT) AS kafka_partition",
            "CAST(NULL AS BIGINT) AS kafka_offset",
            "CAST(NULL AS BIGINT) AS kafka_timestamp",
            "read_error",
        ],
    )
