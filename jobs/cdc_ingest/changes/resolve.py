"""From decoded messages to keyed, ordered changes aimed at target tables.

Shared by every format: the target table name (from the pipeline's template), the key (the
pipeline's ``keys`` first, then what the message names), the key's canonical text, and the full
ordering value (vendor order, then batch, file and line; stored as ``ordering`` encodes it).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest import ordering, sql_text
from cdc_ingest.contract import DELETE, DUPLICATE, EXCLUDED, UPSERT
from cdc_ingest.schema.names import MAX_TABLE_NAME_BYTES, target_name
from cdc_ingest.schema.routes import Route, keys_with_source, routed_target, with_source_names
from cdc_ingest.sql_text import literal
from cdc_ingest.state.lake import OffsetRange

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.config import PipelineConfig


def configured_keys(pipeline: PipelineConfig) -> str:
    """Key columns from the pipeline's ``keys`` for each row's source table, or null."""
    if not pipeline.keys:
        return "CAST(NULL AS ARRAY<STRING>)"
    # One JSON literal (constant-folded by Spark) rather than a literal per name and column.
    lookup = f"from_json({literal(json.dumps(pipeline.keys))}, 'map<string,array<string>>')"
    if not any("." in name for name in pipeline.keys):
        # Only the bare table name can match: skip building the qualified names on every row.
        return f"element_at({lookup}, src_table)"
    candidates = [
        "concat_ws('.', src_db, src_schema, src_table)",
        "concat_ws('.', src_db, src_table)",
        "concat_ws('.', src_schema, src_table)",
        "src_table",
    ]
    return "coalesce(" + ", ".join(f"element_at({lookup}, {c})" for c in candidates) + ")"


# The batch id as text, on every change: what later stages cast to ``_cdc_batch_id``.
BATCH_TEXT = "_cdc_batch_text"

# Characters ``to_json`` escapes in a string: a value without them is its own JSON text.
JSON_ESCAPED = r'["\\\x00-\x1f]'


_OPEN_KEY, _CLOSE_KEY = literal('["'), literal('"]')


def key_text(first: str = "_first_key", raw: str = "_raw_key") -> str:
    """The key's canonical text, ``to_json`` of its values: ``["42"]``, ``["a","b"]``.

    A one-column key whose value needs no escaping is quoted by concatenation, which costs far
    less than a JSON generator per row and yields the same text.
    """
    plain = (
        f"size(_cdc_keys) = 1 AND {first} IS NOT NULL"
        f" AND NOT ({first} RLIKE {literal(JSON_ESCAPED)})"
    )
    quoted = f"concat({_OPEN_KEY}, {first}, {_CLOSE_KEY})"
    return f"CASE WHEN {plain} THEN {quoted} ELSE to_json({raw}) END"


# ``db.schema.table`` of a row, for messages and dead letters.
SOURCE_NAME = "concat_ws('.', src_db, src_schema, src_table)"


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


def excluded_source(pipeline: PipelineConfig) -> str | None:
    """Whether a message's source table is one the pipeline does not mirror (its name matched
    whole against ``include_tables`` and ``exclude_tables``), or None when every table is."""
    excluded = None
    if pipeline.include_tables is not None:
        included = literal(f"^(?:{pipeline.include_tables})$")
        excluded = f"(src_table IS NOT NULL AND NOT (src_table RLIKE {included}))"
    if pipeline.exclude_tables is not None:
        pattern = literal(f"^(?:{pipeline.exclude_tables})$")
        matched = f"coalesce(src_table RLIKE {pattern}, false)"
        excluded = matched if excluded is None else f"({excluded} OR {matched})"
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
    error. Written as SQL text (``sql_text``): built call by call, these projections cost about
    800 py4j round trips per batch.
    """
    if pipeline.routes:
        decoded = _with_shard_names(decoded, pipeline.routes)
    keyed = _with_keys(decoded, pipeline, keyless_append_only)
    moved = f"{_UPDATES} AND size(array_compact(_old_raw_key)) = size(_cdc_keys)"
    # Equal key values are equal key texts: comparing the values spares rendering the old key's
    # text for every update that keeps its key.
    moved_away = f"({moved} AND NOT (_old_raw_key <=> _raw_key))"
    target = routed_target(target_name(pipeline.table), pipeline.routes)
    applied = "_cdc_applied" if "_cdc_applied" in decoded.columns else "false"
    key_error = _key_error(pipeline, target, keyless_append_only)
    error = f"CASE WHEN {applied} THEN NULL ELSE coalesce(read_error, error, {key_error}) END"
    # The batch id folds into a binary constant and is text (``BATCH_TEXT``): generated code
    # refers to those instead of writing a number in, so every batch compiles to the same classes
    # (and the JIT's work on them is kept).
    order = ordering.encoded_sql(
        "`order`", f"CAST({batch_id} AS BIGINT)", "_cdc_file_idx", "_cdc_line", "row_in_message"
    )
    if deletes_without_table:
        tableless = f"(kind = {literal(DELETE)} AND src_table IS NULL)"
        target = f"CASE WHEN NOT {tableless} THEN {target} END"
    excluded = excluded_source(pipeline)
    kind = f"CASE WHEN {applied} THEN {literal(DUPLICATE)}"
    if excluded is not None:
        # Whatever a message of a table not mirrored holds, it is not this pipeline's to judge.
        error = f"CASE WHEN NOT {excluded} THEN {error} ELSE read_error END"
        kind += f" WHEN {excluded} THEN {literal(EXCLUDED)}"
    return sql_text.select(
        keyed,
        [
            *(sql_text.name(column) for column in decoded.columns),
            f"{kind} ELSE kind END AS _cdc_kind",
            f"{target} AS _cdc_target",
            f"{SOURCE_NAME} AS _cdc_source",
            "_cdc_keys",
            f"{key_text()} AS _cdc_key",
            f"{order} AS _cdc_order",
            f"{error} AS _cdc_error",
            f"{literal(str(batch_id))} AS {BATCH_TEXT}",
            f"CASE WHEN {moved_away} THEN {key_text('_old_first', '_old_raw_key')} END"
            " AS _cdc_old_key",
            f"CASE WHEN {moved_away} THEN map_from_arrays(_cdc_keys, _old_raw_key) END"
            " AS _cdc_old_key_values",
        ],
    )


# Updates whose before image may name another key (``_with_keys``).
_UPDATES = f"(kind = {literal(UPSERT)} AND before IS NOT NULL AND size(_cdc_keys) > 0)"


def _with_shard_names(decoded: DataFrame, routes: tuple[Route, ...]) -> DataFrame:
    """A routed row names its shard in columns of its own (``schema/routes``): its image and key
    values get them."""
    return sql_text.select(
        decoded,
        [
            f"{with_source_names(sql_text.name(c), routes)} AS {sql_text.name(c)}"
            if c in ("image", "key_values")
            else sql_text.name(c)
            for c in decoded.columns
        ],
    )


def _with_keys(
    decoded: DataFrame, pipeline: PipelineConfig, keyless_append_only: bool
) -> DataFrame:
    """The change's key columns (``_cdc_keys``), its raw key values and, for an update whose
    before image holds another key, the old ones.

    Keys and raw key values each get a projection of their own: every later use then reads a
    column instead of re-evaluating the lookup inside the (interpreted) lambda functions.
    """
    known = keys_with_source(f"coalesce({configured_keys(pipeline)}, key_names)", pipeline.routes)
    if keyless_append_only:
        known = f"coalesce({known}, CAST(array() AS ARRAY<STRING>))"
    first = "element_at(_cdc_keys, 1)"
    # Most tables have a one-column key: it skips the (interpreted) lambda function.
    single = "size(_cdc_keys) = 1"
    raw_key = (
        f"CASE WHEN {single} THEN array(_first_key)"
        f" ELSE transform(_cdc_keys, _k -> {_value('_k')}) END"
    )
    # An update whose before image holds another key moved the row: the old key is deleted
    # (see apply.update_images). Canal's ``old`` holds only changed columns: the rest are as after.
    old_first = f"CASE WHEN {_UPDATES} THEN coalesce(element_at(before, {first}), _first_key) END"
    old_value = (
        "coalesce(element_at(before, _k), element_at(key_values, _k), element_at(image, _k))"
    )
    old_raw_key = (
        f"CASE WHEN {_UPDATES} AND {single} THEN array(_old_first)"
        f" WHEN {_UPDATES} THEN transform(_cdc_keys, _k -> {old_value}) END"
    )
    return sql_text.with_columns(
        decoded,
        [
            f"{known} AS _cdc_keys",
            f"{_value(first)} AS _first_key",
            f"{raw_key} AS _raw_key",
            f"{old_first} AS _old_first",
            f"{old_raw_key} AS _old_raw_key",
        ],
    )


def _value(key: str) -> str:
    """A key column's value in a message: its key values first, then its image."""
    return f"coalesce(element_at(key_values, {key}), element_at(image, {key}))"


def _key_error(pipeline: PipelineConfig, target: str, keyless_append_only: bool) -> str:
    """Why a change cannot be applied for its target's name or its key, or null."""
    is_change = f"kind IN ({literal(UPSERT)}, {literal(DELETE)})"
    limit = f" bytes long; a table name may have at most {MAX_TABLE_NAME_BYTES}"
    too_long = (
        f"concat({literal('target table name ' + chr(39))}, substring({target}, 1, 40),"
        f" {literal('...' + chr(39) + ' is ')}, CAST(octet_length({target}) AS STRING),"
        f" {literal(limit)})"
    )
    where = f": add it under keys: in pipeline '{pipeline.name}'"
    unknown = f"concat('no key columns known for source table ', {SOURCE_NAME}, {literal(where)})"
    missing = f"filter(_cdc_keys, _k -> {_value('_k')} IS NULL)"
    no_column = (
        f"concat({literal('key column ' + chr(39))}, element_at({missing}, 1),"
        f" {literal(chr(39) + ' is missing from the message')})"
    )
    no_keys = "(_cdc_keys IS NULL OR size(_cdc_keys) = 0)"
    # array_compact drops the missing values: cheaper than filtering for them on every row.
    return (
        f"CASE WHEN {is_change} AND octet_length({target}) > {MAX_TABLE_NAME_BYTES} THEN {too_long}"
        f" WHEN {is_change} AND {no_keys} AND {literal(not keyless_append_only)} THEN {unknown}"
        f" WHEN {is_change} AND size(array_compact(_raw_key)) < size(_cdc_keys) THEN {no_column}"
        " END"
    )
