"""The ``_cdc_ddl_history`` table: every DDL record a pipeline has seen, in stream order.

Each record is kept with where it came from and what became of it (``status``: applied,
no_change, rejected, ignored, failed; ``detail`` says what was done or why not). DDL records
change no row and are never dead letters.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_ingest.catalog_commits import append
from cdc_ingest.contract import DDL
from cdc_ingest.state.tables import DDL_HISTORY, qualified

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RECORDED = "recorded"
NOT_APPLIED = "recorded only"


def record_ddl(
    spark: SparkSession,
    catalog: str,
    namespace: str,
    pipeline: str,
    batch_id: int,
    records: DataFrame,
    files: list[str],
    events: list[Any] | None = None,
) -> None:
    """Append the batch's DDL records, once: a resumed batch that already wrote them skips."""
    table = qualified(catalog, namespace, DDL_HISTORY)
    already = (
        spark.table(table)
        .where((F.col("pipeline") == pipeline) & (F.col("batch_id") == batch_id))
        .limit(1)
        .count()
    )
    if already:
        return
    names = spark.createDataFrame(list(enumerate(files)), "_cdc_file_idx int, file string")
    outcomes = spark.createDataFrame(
        [
            (e.file_idx, e.line, e.row, e.target or None, e.status or None, e.detail or None)
            for e in events or []
        ],
        "_cdc_file_idx int, _cdc_line bigint, row_in_message int, _target string, "
        "_status string, _detail string",
    )
    source = F.col("_cdc_source")
    rows = (
        records.where(F.col("_cdc_error").isNull() & (F.col("_cdc_kind") == DDL))
        .join(F.broadcast(names), "_cdc_file_idx")
        .join(F.broadcast(outcomes), ["_cdc_file_idx", "_cdc_line", "row_in_message"], "left")
        .select(
            F.lit(pipeline).alias("pipeline"),
            F.lit(batch_id).cast("bigint").alias("batch_id"),
            "file",
            F.col("_cdc_line").alias("line"),
            F.when(source != "", source).alias("source_table"),
            # The table the statement names (see ``collect_ddl``), else the message's.
            F.coalesce("_target", F.when(F.col("_cdc_target") != "", F.col("_cdc_target"))).alias(
                "target_table"
            ),
            "op",
            F.col("ddl").alias("statement"),
            F.timestamp_millis(F.col("event_ms")).alias("event_time"),
            F.col("_cdc_order").alias("_cdc_order"),
            F.coalesce("_status", F.lit(RECORDED)).alias("status"),
            F.coalesce("_detail", F.lit(NOT_APPLIED)).alias("detail"),
            F.lit(datetime.now(UTC).replace(tzinfo=None)).cast("timestamp").alias("recorded_at"),
        )
    )
    append(
        rows.writeTo(table)
        .option("snapshot-property.cdc.pipeline", pipeline)
        .option("snapshot-property.cdc.batch-id", str(batch_id))
    )
