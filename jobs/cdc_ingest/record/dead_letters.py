"""The ``_cdc_dead_letters`` table: every line of a batch that could not be applied."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_ingest.catalog_commits import append
from cdc_ingest.changes.inventory import Batch
from cdc_ingest.state.summary import RunSummary
from cdc_ingest.state.tables import DEAD_LETTERS, qualified

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEAD_LETTER_SAMPLES = 20
KAFKA_COLUMNS = ("kafka_topic", "kafka_partition", "kafka_offset")


def write_dead_letters(
    spark: SparkSession,
    catalog: str,
    namespace: str,
    pipeline: str,
    batch: Batch,
    landed: DataFrame,
    typing_errors: list[DataFrame],
    summary: RunSummary,
    only_new: bool = False,
) -> None:
    """Append the batch's dead letters, once: a resumed batch that already wrote them skips.

    Decode errors come from the cached batch, which keeps their lines; lines with typing errors
    are read again from ``landed`` (records before decoding), which costs no JSON parse. With
    ``only_new`` (replays, which read files already applied) a line already dead-lettered by any
    batch of the pipeline (same file, line and row) is not written again.
    """
    if not summary.dead_lettered:
        return
    table = qualified(catalog, namespace, DEAD_LETTERS)
    files = spark.createDataFrame(list(enumerate(summary.files)), "_cdc_file_idx int, file string")
    letters = _batch_errors(batch, landed, typing_errors).join(F.broadcast(files), "_cdc_file_idx")
    letters = letters.select(
        F.lit(pipeline).alias("pipeline"),
        F.lit(batch.batch_id).cast("bigint").alias("batch_id"),
        "file",
        F.col("_cdc_line").alias("line"),
        F.col("row_in_message").alias("row"),
        *KAFKA_COLUMNS,
        F.when(F.col("source_table") != "", F.col("source_table")).alias("source_table"),
        F.when(F.col("target_table") != "", F.col("target_table")).alias("target_table"),
        "reason",
        "raw",
        F.lit(datetime.now(UTC).replace(tzinfo=None)).cast("timestamp").alias("recorded_at"),
    )
    if only_new:
        letters = _not_recorded(spark.table(table), pipeline, letters)
    letters = letters.localCheckpoint(eager=True)
    samples = (
        letters.orderBy("file", "line", "row")
        .select("file", "line", "row", "reason")
        .limit(DEAD_LETTER_SAMPLES)
    )
    summary.dead_letter_samples = [
        f"{r['file']}:{r['line']}{f' row {r[2]}' if r[2] else ''}: {r['reason']}"
        for r in samples.collect()
    ]
    # Only a resumed batch can find its own dead letters already written.
    if summary.resumed and not only_new:
        already = (
            spark.table(table)
            .where((F.col("pipeline") == pipeline) & (F.col("batch_id") == batch.batch_id))
            .limit(1)
            .count()
        )
        if already:
            return
    append(
        letters.writeTo(table)
        .option("snapshot-property.cdc.pipeline", pipeline)
        .option("snapshot-property.cdc.batch-id", str(batch.batch_id))
    )


def _batch_errors(batch: Batch, landed: DataFrame, typing_errors: list[DataFrame]) -> DataFrame:
    """Every line of the batch that could not be applied, with its reason: decode errors from
    the cached batch, typing errors with their lines read again from ``landed``."""
    errors = batch.cached.where(F.col("_cdc_error").isNotNull()).select(
        "_cdc_file_idx",
        "_cdc_line",
        "row_in_message",
        F.col("_cdc_error").alias("reason"),
        F.col("_cdc_source").alias("source_table"),
        F.col("_cdc_target").alias("target_table"),
        "raw",
        *KAFKA_COLUMNS,
    )
    if typing_errors:
        typed = functools.reduce(DataFrame.unionByName, typing_errors)
        lines = landed.select("_cdc_file_idx", "_cdc_line", "raw", *KAFKA_COLUMNS)
        errors = errors.unionByName(typed.join(lines, ["_cdc_file_idx", "_cdc_line"]))
    return errors


def _not_recorded(recorded: DataFrame, pipeline: str, letters: DataFrame) -> DataFrame:
    """``letters`` but those any batch of the pipeline recorded (same file, line and row) in
    ``recorded``, the dead-letter table."""
    kept = recorded.where(F.col("pipeline") == pipeline).select(
        F.col("file").alias("_file"),
        F.col("line").alias("_line"),
        F.coalesce("row", F.lit(0)).alias("_row"),
    )
    return letters.join(
        kept,
        (F.col("file") == F.col("_file"))
        & (F.col("line") == F.col("_line"))
        & (F.coalesce(F.col("row"), F.lit(0)) == F.col("_row")),
        "left_anti",
    )


def decode_error_samples(batch: Batch, files: list[str]) -> list[str]:
    """The first decode errors of a batch as ``file:line[ row n]: reason`` (for dry runs)."""
    errors = (
        batch.cached.where(F.col("_cdc_error").isNotNull())
        .select("_cdc_file_idx", "_cdc_line", "row_in_message", "_cdc_error")
        .orderBy("_cdc_file_idx", "_cdc_line", "row_in_message")
        .limit(DEAD_LETTER_SAMPLES)
        .collect()
    )
    return [f"{files[r[0]]}:{r[1]}{f' row {r[2]}' if r[2] else ''}: {r[3]}" for r in errors]
