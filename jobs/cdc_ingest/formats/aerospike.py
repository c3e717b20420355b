"""Aerospike Kafka Source (outbound) connector, flat JSON serialization (seed 004).

``{"metadata": {msg, namespace, set, userKey, digest, gen, lut, exp, durable}, <bin>: <value>…}``:
the metadata sits under a configurable key (pipeline option ``metadata_key``), the record's bins
at top level. A write carries the whole record (bins absent from it are NULL afterwards); a
delete carries only metadata, often without the set. The digest (Base64 RIPEMD-160 of set and user
key) identifies a record within its namespace, so it is the key, and a delete without a set is
aimed at every table of the namespace keyed by digest. Order: ``lut`` (last update, ms), then
``gen`` (generation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import functions as F

from cdc_ingest.contract import DELETE, UPSERT, ColumnType, TypeHint
from cdc_ingest.formats.base import Decoder
from cdc_ingest.formats.common import lookup, no_before, no_key_values, number, parse_error

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

METADATA_SCHEMA = (
    "msg string, namespace string, set string, userKey string, digest string, gen string, "
    "lut string, exp string, durable string"
)
SHAPE = "a JSON object with a metadata object {msg, namespace, digest…} and the bins"
OPS = {"write": UPSERT, "delete": DELETE}
KEY = "digest"
# Metadata kept as columns; the record's bins take every other column name.
META_COLUMNS = {
    "digest": ColumnType("string"),
    "userKey": ColumnType("string"),  # a long, double, Base64 bytes or string: text holds all
    "_cdc_gen": ColumnType("bigint"),
    "_cdc_lut": ColumnType("bigint"),
    "_cdc_exp": ColumnType("bigint"),
}
HINT = "aerospike"


class AerospikeDecoder(Decoder):
    """Aerospike flat JSON."""

    name: ClassVar[str] = "aerospike"
    image_json_paths: ClassVar[tuple[str, ...]] = ("$",)
    deletes_without_table: ClassVar[bool] = True

    def decode(self, records: DataFrame) -> DataFrame:
        metadata_key = str(self.options.get("metadata_key") or "metadata")
        no_set_table = str(self.options.get("no_set_table") or "no_set")
        value = F.col("value")
        message = F.from_json(value, "map<string,string>")
        parsed = records.withColumn("_m", message).withColumn(
            "_meta", F.from_json(F.element_at(F.col("_m"), F.lit(metadata_key)), METADATA_SCHEMA)
        )
        m, meta = F.col("_m"), F.col("_meta")
        op = meta.getField("msg")
        kind = lookup(OPS, F.lower(op))
        digest = meta.getField("digest")
        lut, gen = meta.getField("lut").cast("bigint"), meta.getField("gen").cast("bigint")
        # With the Kafka envelope the record key ({namespace, set, userKey, digest}) may name the
        # set a delete's metadata leaves out.
        set_name = F.coalesce(meta.getField("set"), F.get_json_object("key", "$.set"))
        metadata_columns = F.map_filter(
            F.create_map(
                F.lit("digest"),
                digest,
                F.lit("userKey"),
                meta.getField("userKey"),
                F.lit("_cdc_gen"),
                gen.cast("string"),
                F.lit("_cdc_lut"),
                lut.cast("string"),
                F.lit("_cdc_exp"),
                meta.getField("exp").cast("bigint").cast("string"),
            ),
            lambda _, v: v.isNotNull(),
        )
        reserved = [metadata_key, *META_COLUMNS]
        bins = F.map_filter(m, lambda k, _: ~k.isin(*reserved))
        image = F.when(kind == DELETE, F.create_map(F.lit(KEY), digest)).otherwise(
            F.map_concat(metadata_columns, bins)
        )
        error = (
            F.when(m.isNull(), parse_error(value, self.name, SHAPE))
            .when(
                meta.isNull(),
                F.lit(
                    f"message has no '{metadata_key}' object (the pipeline's metadata_key option)"
                ),
            )
            .when(op.isNull(), F.lit(f"{metadata_key}.msg is missing"))
            .when(
                kind.isNull(),
                F.concat(F.lit("unknown msg '"), op, F.lit("' (expected write or delete)")),
            )
            .when(digest.isNull(), F.lit(f"{metadata_key}.digest is missing"))
        )
        table = F.when(kind == DELETE, set_name).otherwise(
            F.coalesce(set_name, F.lit(no_set_table))
        )
        return parsed.select(
            *records.columns,
            meta.getField("namespace").alias("src_db"),
            F.lit(None).cast("string").alias("src_schema"),
            table.alias("src_table"),
            op.alias("op"),
            kind.alias("kind"),
            F.array(number(lut), number(gen)).alias("order"),
            image.alias("image"),
            F.array(F.lit(KEY)).alias("key_names"),
            no_key_values().alias("key_values"),
            F.lit(HINT).alias("schema_hint"),
            error.alias("error"),
            F.when(lut > 0, lut).alias("event_ms"),
            F.lit(None).cast("string").alias("ddl"),
            F.lit(0).alias("row_in_message"),
            no_before().alias("before"),
        )

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        return TypeHint(columns=dict(META_COLUMNS)) if schema_hint == HINT else None
