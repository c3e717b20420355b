"""Tables without a key: every row image is appended, nothing is matched, updated or deleted.

DataHub shards a table without a primary key by table name and its messages name no key: such a
table cannot be mirrored row for row, so (unless the pipeline's ``keys`` names a key) it is kept
as an append-only log of row images. Deletes are counted and skipped, never guessed at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest import sql_text
from cdc_ingest.apply.expectations import check_expectations
from cdc_ingest.apply.typed_changes import typed_changes, typing_errors
from cdc_ingest.catalog_commits import append
from cdc_ingest.contract import DELETE, UPSERT
from cdc_ingest.schema.target import TargetTable
from cdc_ingest.state.summary import TableSummary
from cdc_ingest.state.tables import ORDER_COLUMN
from cdc_ingest.table_options import DELETED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.apply.commit_notes import PipelineBatch

# A batch appends to a table once per segment (the changes between two DDL statements).
PART_PROPERTY = "cdc.batch-part"


def _already_appended(
    spark: SparkSession, target: TargetTable, batch: PipelineBatch, part: str
) -> bool:
    """Whether a snapshot of this batch's segment is in the table (a run that died before its
    checkpoint), committed by this pipeline: another's batch of the same number is not it.

    Keyed tables are safe to re-apply by construction; appends are not, so a rerun looks for
    its own snapshot first.
    """
    snapshots = spark.table(f"{target.identifier}.snapshots")
    mine = F.expr(batch.snapshot_filter()) & (F.col("summary").getItem(PART_PROPERTY) == part)
    return bool(snapshots.where(mine).limit(1).count())


def apply_append_only(
    spark: SparkSession,
    changes: DataFrame,
    target: TargetTable,
    batch: PipelineBatch,
    rows: int,
    segment: int = 0,
) -> tuple[TableSummary, DataFrame]:
    """Append this keyless table's row images; returns its summary and its typing errors.

    Args:
        spark: the session.
        changes: the batch's changes (cached), every table's.
        target: the table (``keys`` empty).
        batch: the batch (its pipeline and id).
        rows: how many of ``changes`` are aimed at this table.
        segment: which of the batch's segments of this table (see ``apply.segmented``).
    """
    typed = typed_changes(changes, target).localCheckpoint(eager=True)
    expectations = check_expectations(typed, target)
    counts = {
        (r["_cdc_kind"], r["ok"]): r["n"]
        for r in typed.groupBy("_cdc_kind", F.col("_type_error").isNull().alias("ok"))
        .agg(F.count(F.lit(1)).alias("n"))
        .collect()
    }
    appended, skipped = counts.get((UPSERT, True), 0), counts.get((DELETE, True), 0)
    summary = TableSummary(
        table=target.name,
        messages=appended + skipped,
        inserted=appended,
        append_only_deletes=skipped,
        dead_lettered=rows - appended - skipped,
        expectations=expectations,
    )
    part = f"{batch.batch_id}:{segment}"
    if appended and not _already_appended(spark, target, batch, part):
        columns: list[str | Column] = [
            *sql_text.columns(target.written_columns),
            ORDER_COLUMN,
            "_cdc_op",
            "_cdc_batch_id",
        ]
        if target.deletes == "soft":
            columns.append(F.lit(False).alias(DELETED_COLUMN))
        good = typed.where(F.col("_type_error").isNull() & (F.col("_cdc_kind") == UPSERT))
        append(
            good.orderBy(ORDER_COLUMN)
            .select(*columns)
            .writeTo(target.identifier)
            .options(**{f"snapshot-property.{k}": v for k, v in batch.properties().items()})
            .option(f"snapshot-property.{PART_PROPERTY}", part)
        )
    return summary, typing_errors(typed, target)
