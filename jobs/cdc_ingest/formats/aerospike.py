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

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DELETE, UPSERT, ColumnType, TypeHint
from cdc_ingest.formats.base import Message, MessageDecoder, unknown
from cdc_ingest.formats.common import PLAIN_JSON_OPTIONS, lookup, number, parse_error

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


class AerospikeDecoder(MessageDecoder):
    """Aerospike flat JSON."""

    name: ClassVar[str] = "aerospike"
    image_json_paths: ClassVar[tuple[str, ...]] = ("$",)
    deletes_without_table: ClassVar[bool] = True
    own_columns: ClassVar[frozenset[str]] = frozenset(
        c for c in META_COLUMNS if c.startswith("_cdc_")
    )

    @property
    def metadata_key(self) -> str:
        """Where a message holds its metadata (the pipeline's ``metadata_key`` option)."""
        return str(self.options.get("metadata_key") or "metadata")

    def parse(self, records: DataFrame) -> DataFrame:
        # The bins are at top level: a flat object of strings, its metadata parsed on its own.
        message = F.from_json(F.col("value"), "map<string,string>", PLAIN_JSON_OPTIONS)
        metadata = F.from_json(F.element_at(F.col("_m"), F.lit(self.metadata_key)), METADATA_SCHEMA)
        return records.withColumn("_m", message).withColumn("_meta", metadata)

    def message(self, m: Column, value: Column) -> Message:
        metadata_key = self.metadata_key
        no_set_table = str(self.options.get("no_set_table") or "no_set")
        meta = F.col("_meta")
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
        return Message(
            op=op,
            kind=kind,
            table=F.when(kind == DELETE, set_name).otherwise(
                F.coalesce(set_name, F.lit(no_set_table))
            ),
            order=F.array(number(lut), number(gen)),
            image=image,
            db=meta.getField("namespace"),
            key_names=F.array(F.lit(KEY)),
            schema_hint=F.lit(HINT),
            event_ms=F.when(lut > 0, lut),
            problems=[
                (m.isNull(), parse_error(value, self.name, SHAPE)),
                (
                    meta.isNull(),
                    F.lit(
                        f"message has no '{metadata_key}' object (the pipeline's metadata_key "
                        "option)"
                    ),
                ),
                (op.isNull(), F.lit(f"{metadata_key}.msg is missing")),
                (kind.isNull(), unknown("msg", op, " (expected write or delete)")),
                (digest.isNull(), F.lit(f"{metadata_key}.digest is missing")),
            ],
        )

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        return TypeHint(columns=dict(META_COLUMNS)) if schema_hint == HINT else None
