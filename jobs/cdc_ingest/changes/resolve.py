"""From decoded messages to keyed, ordered changes aimed at target tables.

Shared by every format: the target table name (from the pipeline's template), the key (the
pipeline's ``keys`` first, then what the message names), the key's canonical text, and the full
ordering value (vendor order, then batch, file and line).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DELETE, DUPLICATE, EXCLUDED, UPSERT
from cdc_ingest.schema.names import MAX_TABLE_NAME_BYTES, target_name
from cdc_ingest.state.lake import OffsetRange

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.config import PipelineConfig


def configured_keys(pipeline: PipelineConfig) -> Column:
    """Key columns from the pipeline's ``keys`` for each row's source table, or null."""
    if not pipeline.keys:
        return F.lit(None).cast("array<string>")
    # One JSON literal (constant-folded by Spark) rather than a literal per name and column: with
    # keys for hundreds of tables, those cost a py4j round trip each (1.3 s for 300 tables).
    lookup = F.from_json(F.lit(json.dumps(pipeline.keys)), "map<string,array<string>>")
    db, schema, table = F.col("src_db"), F.col("src_schema"), F.col("src_table")
    if not any("." in name for name in pipeline.keys):
        # Only the bare table name can match: skip building the qualified names on every row.
        return F.element_at(lookup, table)
    candidates = [
        F.concat_ws(".", db, schema, table),
        F.concat_ws(".", db, table),
        F.concat_ws(".", schema, table),
        table,
    ]
    return F.coalesce(*[F.element_at(lookup, c) for c in candidates])


# The batch id as text, on every change: what later stages cast to ``_cdc_batch_id``.
BATCH_TEXT = "_cdc_batch_text"

# Characters ``to_json`` escapes in a string: a value without them is its own JSON text.
JSON_ESCAPED = r'["\\\x00-\x1f]'


def key_text(first: str = "_first_key", raw: str = "_raw_key") -> Column:
    """The key's canonical text, ``to_json`` of its values: ``["42"]``, ``["a","b"]``.

    A one-column key whose value needs no escaping is quoted by concatenation, which costs far
    less than a JSON generator per row and yields the same text.
    """
    value = F.col(first)
    plain = (F.size("_cdc_keys") == 1) & value.isNotNull() & ~value.rlike(JSON_ESCAPED)
    return F.when(plain, F.concat(F.lit('["'), value, F.lit('"]'))).otherwise(F.to_json(raw))


def source_name() -> Column:
    """``db.schema.table`` of a row, for messages and dead letters."""
    return F.concat_ws(".", "src_db", "src_schema", "src_table")


def mark_applied_offsets(
    records: DataFrame, spark: SparkSession, ranges: list[OffsetRange]
) -> DataFrame:
    """Flag Kafka records already applied: in a committed offset range or repeated in the batch."""
    from pyspark.sql import Window

    first = Window.partitionBy("kafka_topic", "kafka_partition", "kafka_offset").orderBy(
        "_cdc_file_idx", "_cdc_line"
    )
    has_offset = F.col("kafka_offset").isNotNull()
    repeated = has_offset & (F.row_number().over(first) > 1)
    flagged = records.withColumn("_cdc_applied", repeated)
    if not ranges:
        return flagged
    applied = spark.createDataFrame(
        [(r.topic, r.partition, r.min_offset, r.max_offset) for r in ranges],
        "r_topic string, r_partition int, r_min bigint, r_max bigint",
    )
    joined = flagged.join(
        F.broadcast(applied),
        (F.col("kafka_topic") == F.col("r_topic"))
        & (F.col("kafka_partition").eqNullSafe(F.col("r_partition")))
        & F.col("kafka_offset").between(F.col("r_min"), F.col("r_max")),
        "left",
    )
    return (
        joined.withColumn("_cdc_applied", F.col("_cdc_applied") | F.col("r_topic").isNotNull())
        .drop("r_topic", "r_partition", "r_min", "r_max")
        .dropDuplicates(["_cdc_file_idx", "_cdc_line"])
    )


def excluded_source(pipeline: PipelineConfig) -> Column | None:
    """Whether a message's source table is one the pipeline does not mirror (its name matched
    whole against ``include_tables`` and ``exclude_tables``), or None when every table is."""
    table = F.col("src_table")
    excluded = None
    if pipeline.include_tables is not None:
        excluded = table.isNotNull() & ~table.rlike(f"^(?:{pipeline.include_tables})$")
    if pipeline.exclude_tables is not None:
        matched = F.coalesce(table.rlike(f"^(?:{pipeline.exclude_tables})$"), F.lit(False))
        excluded = matched if excluded is None else excluded | matched
    return excluded


def resolve_changes(
    decoded: DataFrame,
    pipeline: PipelineConfig,
    batch_id: int,
    deletes_without_table: bool = False,
    keyless_append_only: bool = False,
) -> DataFrame:
    """Add target table, key columns, key text and full order; fold every error into ``error``.

    With ``deletes_without_table``, a delete that names no table gets a null target: the job
    applies it to every table of the namespace keyed like it. With ``keyless_append_only``, a
    change whose table has no known key gets an empty key (an append-only table) instead of an
    error.
    """
    # Keys and raw key values each get a projection of their own: every later use then reads a
    # column instead of re-evaluating the lookup inside the (interpreted) lambda functions.
    known = F.coalesce(configured_keys(pipeline), F.col("key_names"))
    if keyless_append_only:
        known = F.coalesce(known, F.array().cast("array<string>"))
    keys = F.col("_cdc_keys")
    first = F.element_at(keys, 1)
    first_value = F.coalesce(F.element_at("key_values", first), F.element_at("image", first))
    # Most tables have a one-column key: it skips the (interpreted) lambda function.
    single = F.size(keys) == 1
    keyed = (
        decoded.withColumn("_cdc_keys", known)
        .withColumn("_first_key", first_value)
        .withColumn(
            "_raw_key",
            F.when(single, F.array("_first_key")).otherwise(
                F.transform(
                    keys,
                    lambda k: F.coalesce(F.element_at("key_values", k), F.element_at("image", k)),
                )
            ),
        )
    )
    # An update whose before image holds another key moved the row: the old key is deleted
    # (see apply.update_images). Canal's ``old`` holds only changed columns: the rest are as after.
    before = F.col("before")
    updates = (F.col("kind") == UPSERT) & before.isNotNull() & (F.size(keys) > 0)
    keyed = keyed.withColumn(
        "_old_first", F.when(updates, F.coalesce(F.element_at(before, first), F.col("_first_key")))
    ).withColumn(
        "_old_raw_key",
        F.when(updates & single, F.array("_old_first")).when(
            updates,
            F.transform(
                keys,
                lambda k: F.coalesce(
                    F.element_at(before, k),
                    F.element_at("key_values", k),
                    F.element_at("image", k),
                ),
            ),
        ),
    )
    old_key = key_text("_old_first", "_old_raw_key")
    moved = updates & (F.size(F.array_compact("_old_raw_key")) == F.size(keys))
    # Equal key values are equal key texts: comparing the values spares rendering the old key's
    # text for every update that keeps its key.
    moved_away = moved & ~F.col("_old_raw_key").eqNullSafe(F.col("_raw_key"))
    missing = F.filter(
        keys, lambda k: F.coalesce(F.element_at("key_values", k), F.element_at("image", k)).isNull()
    )
    is_change = F.col("kind").isin(UPSERT, DELETE)
    no_keys = keys.isNull() | (F.size(keys) == 0)
    target = target_name(pipeline.table)
    key_error = (
        F.when(
            is_change & (F.octet_length(target) > MAX_TABLE_NAME_BYTES),
            F.concat(
                F.lit("target table name '"),
                F.substring(target, 1, 40),
                F.lit("...' is "),
                F.octet_length(target).cast("string"),
                F.lit(f" bytes long; a table name may have at most {MAX_TABLE_NAME_BYTES}"),
            ),
        )
        .when(
            is_change & no_keys & F.lit(not keyless_append_only),
            F.concat(
                F.lit("no key columns known for source table "),
                source_name(),
                F.lit(f": add it under keys: in pipeline '{pipeline.name}'"),
            ),
        )
        .when(
            # array_compact drops the missing values: cheaper than filtering for them on every row.
            is_change & (F.size(F.array_compact("_raw_key")) < F.size(keys)),
            F.concat(
                F.lit("key column '"),
                F.element_at(missing, 1),
                F.lit("' is missing from the message"),
            ),
        )
    )
    applied = F.col("_cdc_applied") if "_cdc_applied" in decoded.columns else F.lit(False)
    error = F.when(applied, F.lit(None)).otherwise(
        F.coalesce(F.col("read_error"), F.col("error"), key_error)
    )
    # The batch id as an array constant and as text (``BATCH_TEXT``): generated code refers to
    # those instead of writing a number in, so every batch compiles to the same classes (and the
    # JIT's work on them is kept).
    position = F.concat(
        F.array(F.lit(batch_id).cast("bigint")),
        F.array(
            F.col("_cdc_file_idx").cast("bigint"),
            F.col("_cdc_line").cast("bigint"),
            F.col("row_in_message").cast("bigint"),
        ),
    )
    if deletes_without_table:
        tableless = (F.col("kind") == DELETE) & F.col("src_table").isNull()
        target = F.when(~tableless, target)
    excluded = excluded_source(pipeline)
    if excluded is not None:
        # Whatever a message of a table not mirrored holds, it is not this pipeline's to judge.
        error = F.when(~excluded, error).otherwise(F.col("read_error"))
    kind = F.when(applied, F.lit(DUPLICATE))
    if excluded is not None:
        kind = kind.when(excluded, F.lit(EXCLUDED))
    return keyed.select(
        *decoded.columns,
        kind.otherwise(F.col("kind")).alias("_cdc_kind"),
        target.alias("_cdc_target"),
        source_name().alias("_cdc_source"),
        keys,
        key_text().alias("_cdc_key"),
        F.concat(F.col("order"), position).alias("_cdc_order"),
        error.alias("_cdc_error"),
        F.lit(str(batch_id)).alias(BATCH_TEXT),
        F.when(moved_away, old_key).alias("_cdc_old_key"),
        F.when(moved_away, F.map_from_arrays(keys, F.col("_old_raw_key"))).alias(
            "_cdc_old_key_values"
        ),
    )
