"""What an update says beyond its new row: the key it moved the row from, and the values it did
not send.

- An update whose before image holds another key moved the row (``resolve_changes`` sets
  ``_cdc_old_key``): the old key is deleted in the update's place in the stream.
- An update sent as two messages (DataHub's UPDATE_BEFOR, then UPDATE_AFTER, sharing a sequence
  id) is paired inside the batch: a pair whose keys differ moved the row (``pair_before_halves``).
  A pair split across two batches cannot be paired: the old key stays.
- A value sent as the format's placeholder for "not sent" (Debezium's TOAST placeholder) keeps the
  key's value from an earlier change of the batch, else the table's (``KEEP_COLUMN``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from cdc_ingest.contract import DELETE, UPSERT
from cdc_ingest.ordering import elements_sql
from cdc_ingest.sql_text import name
from cdc_ingest.state.tables import ORDER_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdc_ingest.schema.target import TargetTable

# Per change, the columns whose value was not sent (a placeholder): the table keeps its own.
KEEP_COLUMN = "_cdc_keep"
# Marks the delete of an old key that an update moved away from (see with_old_key_deletes).
MOVED_COLUMN = "_cdc_moved"
# A change's first ordering value (the vendor's), which the two halves of an update share.
FIRST_ELEMENT = elements_sql(ORDER_COLUMN, 1, 1)


def with_old_key_deletes(changes: DataFrame, target: TargetTable) -> DataFrame:
    """This table's changes plus, for each update that moved a row to another key, a delete of
    the old key in the update's place in the stream (``MOVED_COLUMN`` marks those deletes).

    The delete has the update's order: a later change to the old key still applies, an older one
    arriving late is stopped by the delete's tombstone, like any delete's.
    """
    mine = changes.where(F.col("_cdc_target") == target.name)
    old = mine.where(F.col("_cdc_old_key").isNotNull()).select(
        *[
            F.lit(DELETE).alias(c)
            if c == "_cdc_kind"
            else F.col("_cdc_old_key").alias(c)
            if c == "_cdc_key"
            else F.col("_cdc_old_key_values").alias(c)
            if c == "image"
            else F.lit(None).cast("map<string,string>").alias(c)
            if c == "key_values"
            else F.col(name(c))
            for c in mine.columns
        ],
        F.lit(True).alias(MOVED_COLUMN),
    )
    return mine.withColumn(MOVED_COLUMN, F.lit(False)).unionByName(old)


def fill_unsent(
    good: DataFrame, columns: list[str], per: tuple[str, ...] = ("_cdc_key",)
) -> DataFrame:
    """A column a change did not send takes the value of the key's latest earlier change in the
    batch that sent it; only if none did does it stay in ``KEEP_COLUMN`` (the table keeps its
    stored value). ``per``: what a key is (``newest_changes``)."""
    so_far = (
        Window.partitionBy(*per)
        .orderBy(F.col(ORDER_COLUMN))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    latest = [
        F.last(
            F.when(~F.array_contains(KEEP_COLUMN, c), F.struct(F.col(name(c)).alias("v"))),
            ignorenulls=True,
        )
        .over(so_far)
        .alias(f"_sent_{c}")
        for c in columns
    ]
    sent = {c: F.col(f"_sent_{c}") for c in columns}
    return good.select("*", *latest).select(
        *[F.col(name(c)) for c in good.columns if c not in columns and c != KEEP_COLUMN],
        *[sent[c].getField("v").alias(c) for c in columns],
        F.array_compact(F.array(*[F.when(sent[c].isNull(), F.lit(c)) for c in columns])).alias(
            KEEP_COLUMN
        ),
    )


def pair_before_halves(cached: DataFrame, changes: DataFrame, table: str) -> DataFrame:
    """This table's changes, where an update's after half whose before half (same first ordering
    value, in this batch) names another key gets that key as ``_cdc_old_key``."""
    halves = cached.where(
        F.col("_cdc_before_half")
        & F.col("_cdc_error").isNull()
        & (F.col("_cdc_target") == table)
        & F.col("_cdc_key").isNotNull()
    ).select(
        F.expr(FIRST_ELEMENT).alias("_pair"),
        F.col("_cdc_key").alias("_half_key"),
        F.col("image").alias("_half_image"),
    )
    mine = changes.where(F.col("_cdc_target") == table)
    joined = mine.join(halves, F.expr(FIRST_ELEMENT) == halves["_pair"], "left")
    moved = (
        (F.col("_cdc_kind") == UPSERT)
        & F.col("_cdc_old_key").isNull()
        & F.col("_half_key").isNotNull()
        & (F.col("_half_key") != F.col("_cdc_key"))
    )
    old_values = F.map_from_arrays(
        "_cdc_keys", F.transform("_cdc_keys", lambda k: F.element_at("_half_image", k))
    )
    return joined.select(
        *[
            F.when(moved, F.col("_half_key")).otherwise(F.col(name(c))).alias(c)
            if c == "_cdc_old_key"
            else F.when(moved, old_values).otherwise(F.col(name(c))).alias(c)
            if c == "_cdc_old_key_values"
            else F.col(name(c))
            for c in mine.columns
        ]
    )
