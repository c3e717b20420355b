"""OceanBase OMS SharePlex serialization (seed 001).

``{"data": {…}, "meta": {"op": "ins"|"upd"|"del", "table": "db.table", "scn", "seq", "time",
"rowid", …}, "key": {…}}``. ``ins`` and ``del`` carry full rows. ``upd`` carries only the modified
columns in ``data`` and the full row before the update in ``key``: the new row is ``key`` patched
with ``data``, so columns the update did not touch keep their values. Messages do not name the
key columns: they come from the pipeline's ``keys``. Values carry no types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import functions as F

from cdc_ingest.contract import DELETE, UPSERT
from cdc_ingest.formats.base import Decoder
from cdc_ingest.formats.common import (
    JSON_OPTIONS,
    lookup,
    mark_inexact_numbers,
    no_key_values,
    number,
    parse_error,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEMA = "data map<string,string>, key map<string,string>, meta map<string,string>, _corrupt string"
SHAPE = "a JSON object with data and meta {op, table}"
OPS = {"ins": UPSERT, "upd": UPSERT, "del": DELETE}


class OmsSharePlexDecoder(Decoder):
    """OMS SharePlex JSON."""

    name: ClassVar[str] = "oms-shareplex"
    image_json_paths: ClassVar[tuple[str, ...]] = ("$.data", "$.key")

    def decode(self, records: DataFrame) -> DataFrame:
        value = F.col("value")
        parsed = records.withColumn("_m", F.from_json(value, SCHEMA, JSON_OPTIONS))
        m = F.col("_m")
        meta, data, previous = m.getField("meta"), m.getField("data"), m.getField("key")
        op = meta.getItem("op")
        kind = lookup(OPS, F.lower(op))
        is_update = F.lower(op) == "upd"
        untouched = F.map_filter(previous, lambda k, _: ~F.array_contains(F.map_keys(data), k))
        image = mark_inexact_numbers(
            F.when(is_update, F.map_concat(untouched, data)).otherwise(data), value
        )
        qualified = meta.getItem("table")
        has_db = F.instr(qualified, ".") > 0
        table = F.when(has_db, F.substring_index(qualified, ".", -1)).otherwise(qualified)
        db = F.when(
            has_db, F.expr("substring(_m.meta['table'], 1, instr(_m.meta['table'], '.') - 1)")
        )
        error = (
            F.when(m.getField("_corrupt").isNotNull(), parse_error(value, self.name, SHAPE))
            .when(op.isNull(), F.lit("message has no meta.op"))
            .when(kind.isNull(), F.concat(F.lit("unknown meta.op '"), op, F.lit("'")))
            .when(qualified.isNull(), F.lit("message names no table (meta.table)"))
            .when(data.isNull(), F.concat(F.lit("op "), op, F.lit(" has no data")))
            .when(
                is_update & previous.isNull(),
                F.lit(
                    "upd carries only the modified columns and no previous row in 'key': "
                    "the full new row cannot be known"
                ),
            )
        )
        event_ms = F.unix_millis(F.to_timestamp(meta.getItem("time")))
        return parsed.select(
            *records.columns,
            db.alias("src_db"),
            F.lit(None).cast("string").alias("src_schema"),
            table.alias("src_table"),
            op.alias("op"),
            kind.alias("kind"),
            F.array(number(meta.getItem("scn")), number(meta.getItem("seq"))).alias("order"),
            image.alias("image"),
            F.lit(None).cast("array<string>").alias("key_names"),
            no_key_values().alias("key_values"),
            F.lit(None).cast("string").alias("schema_hint"),
            error.alias("error"),
            event_ms.alias("event_ms"),
            F.lit(None).cast("string").alias("ddl"),
            F.lit(0).alias("row_in_message"),
            F.when(is_update, previous).alias("before"),
        )
