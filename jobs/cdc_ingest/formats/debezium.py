"""The Debezium envelope, shared by Lindorm, Arcion and generic Debezium JSON.

A message is either ``{"schema": …, "payload": {op, before, after, source, ts_ms}}`` or the payload
alone. Both shapes are parsed by one ``from_json`` call; row images are parsed as
``map<string,string>`` so that any table's columns decode without knowing its schema up front.
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DDL, DELETE, NOOP, UPSERT, TypeHint
from cdc_ingest.formats.base import Message, MessageDecoder, unknown
from cdc_ingest.formats.common import lookup, number, parse_error
from cdc_ingest.formats.connect_schema import type_hint_from_schema

# Scalars are read as strings: a number sent as a string (or the reverse) must not make Spark
# discard the whole message as corrupt.
# The source fields any decoder of the family reads (the schema's field is ``schema``, or
# Lindorm's ``namespace``). As a struct, the parser skips the rest (connector, version, name,
# gtid, query…): as a map, every field was copied into it and each read scanned its keys.
SOURCE_FIELDS = (
    "db",
    "schema",
    "namespace",
    "table",
    "snapshot",
    "ts_ms",
    "file",
    "pos",
    "row",
    "lsn",
    "scn",
    "event_serial_no",
)
SOURCE_SCHEMA = f"struct<{', '.join(f'`{name}`: string' for name in SOURCE_FIELDS)}>"
PAYLOAD_FIELDS = (
    "op string, ts_ms string, before map<string,string>, after map<string,string>, "
    f"source {SOURCE_SCHEMA}, ddl string"
)
ENVELOPE_SCHEMA = (
    f"schema string, payload struct<{PAYLOAD_FIELDS}>, {PAYLOAD_FIELDS}, _corrupt string"
)
KEY_SCHEMA = "map<string,string>"

# A TRUNCATE ("t", sent with skipped.operations=none) is a statement at its place in the stream:
# the decoder writes it out (TRUNCATE TABLE `t`) for the schema-change stage to apply.
OPS = {"c": UPSERT, "u": UPSERT, "r": UPSERT, "d": DELETE, "t": DDL, "m": NOOP}
INITIAL_SNAPSHOT = ("true", "first", "last", "first_in_data_collection", "last_in_data_collection")
SHAPE = "a JSON object with op/before/after/source (before, after and source must be objects)"


# What Debezium sends for a value it did not read (PostgreSQL TOAST columns an UPDATE left alone,
# without REPLICA IDENTITY FULL): the text placeholder, and for bytea its bytes in Base64.
UNAVAILABLE_VALUES = ("__debezium_unavailable_value", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==")


class DebeziumFamilyDecoder(MessageDecoder):
    """Shared decoding of Debezium-shaped messages; subclasses choose table names and ordering."""

    json_schema = ENVELOPE_SCHEMA
    image_json_paths: ClassVar[tuple[str, ...]] = (
        "$.payload.after",
        "$.after",
        "$.payload.before",
        "$.before",
    )
    #: source field holding the schema (Postgres schema, Lindorm namespace…): one of
    #: ``SOURCE_FIELDS``, which are all the parser keeps of a message's source
    schema_field: ClassVar[str] = "schema"
    #: Schema changes travel on a topic of their own (MySQL's and MariaDB's schema-change topic):
    #: they take effect at their place in the source's order, not where they were landed.
    statements_apart: ClassVar[bool] = True
    #: Messages may embed the Kafka Connect schema of their values (the JSON converter's
    #: ``{"schema", "payload"}``): Avro and Parquet landing files get one from their writer schema.
    embeds_connect_schema: ClassVar[bool] = True

    def order(self, source: Column, envelope_ts: Column, statement: Column | None = None) -> Column:
        """Debezium's order: initial snapshot first, then source time, binlog/LSN/SCN position.

        ``statement``: whether the message is a schema change. A snapshot's statements
        (MySQL's and MariaDB's CREATE TABLE of each captured table) describe the tables its rows
        are read from, so they come first; their source time is when the connector wrote them,
        later than the rows' (which is when the snapshot started).
        """
        snapshot = F.lower(source.getItem("snapshot"))
        # MariaDB's connector sends no snapshot field while streaming (null, not "false").
        in_snapshot = F.coalesce(snapshot.isin(*INITIAL_SNAPSHOT), F.lit(False))
        source_ms = number(source.getItem("ts_ms"))
        if statement is not None:
            source_ms = F.when(~(in_snapshot & statement), source_ms)
        return F.array(
            F.when(in_snapshot, F.lit(0)).otherwise(F.lit(1)).cast("bigint"),
            source_ms,
            number(F.regexp_extract(source.getItem("file"), r"(\d+)$", 1)),
            number(source.getItem("pos")),
            number(source.getItem("row")),
            number(source.getItem("lsn")),
            number(source.getItem("scn")),
            number(source.getItem("event_serial_no")),
            number(envelope_ts),
        )

    unavailable_values = UNAVAILABLE_VALUES

    def message_keys(self, image: Column) -> tuple[Column, Column]:
        """Key column names and values the message carries besides the configured ones."""
        return F.lit(None).cast("array<string>"), F.lit(None).cast("map<string,string>")

    def schema_hint(self, envelope_schema: Column, image: Column) -> Column:
        """The text ``type_hint`` reads: the Connect schema, when it is more than ``{}``."""
        # Spark hands an object over as compact JSON, so the whitespace regex (per row) is only
        # needed for the rare schema sent as a string; a non-empty object starts with {".
        trimmed = F.regexp_replace(envelope_schema, r"\s", "")
        return (
            F.when(envelope_schema.isNull() | envelope_schema.isin("{}", "null"), F.lit(None))
            .when(envelope_schema.startswith('{"'), envelope_schema)
            .when(trimmed.isin("{}", "null"), F.lit(None))
            .otherwise(envelope_schema)
        )

    def is_tombstone(self, value: Column) -> Column:
        """A record that only marks a deleted key for log compaction."""
        return value.isNull()

    def message(self, m: Column, value: Column) -> Message:
        p = m.getField("payload")

        def pick(name: str) -> Column:
            return F.coalesce(p.getField(name), m.getField(name))

        op = F.lower(pick("op"))
        before, after, source = pick("before"), pick("after"), pick("source")
        # A heartbeat record (topic __debezium-heartbeat.<prefix>) holds its time and nothing else.
        heartbeat = F.coalesce(
            op.isNull()
            & pick("ddl").isNull()
            & source.isNull()
            & before.isNull()
            & after.isNull()
            & pick("ts_ms").isNotNull(),
            F.lit(False),
        )
        kind = F.coalesce(
            lookup(OPS, op),
            F.when(pick("ddl").isNotNull(), F.lit(DDL)),
            F.when(heartbeat, F.lit(NOOP)),
        )
        table = source.getItem("table")
        quoted = F.concat(F.lit("`"), F.regexp_replace(table, "`", "``"), F.lit("`"))
        ddl = F.when(op == "t", F.concat(F.lit("TRUNCATE TABLE "), quoted)).otherwise(pick("ddl"))
        image = F.when(kind == DELETE, before).otherwise(after)
        key_names, key_values = self.message_keys(image)
        tombstone = self.is_tombstone(value)
        return Message(
            op=F.when(tombstone, F.lit("tombstone"))
            .when(heartbeat, F.lit("heartbeat"))
            .otherwise(pick("op")),
            kind=F.when(tombstone, F.lit(NOOP)).otherwise(kind),
            table=table,
            order=self.order(source, pick("ts_ms"), F.coalesce(kind == DDL, F.lit(False))),
            image=image,
            db=source.getItem("db"),
            schema=source.getItem(self.schema_field),
            key_names=key_names,
            key_values=key_values,
            schema_hint=self.schema_hint(m.getField("schema"), image),
            event_ms=F.coalesce(source.getItem("ts_ms"), pick("ts_ms")).cast("bigint"),
            ddl=ddl,
            before=F.when(kind == UPSERT, before),
            problems=[
                (tombstone, None),
                (m.getField("_corrupt").isNotNull(), parse_error(value, self.name, SHAPE)),
                (heartbeat, None),
                (op.isNull() & pick("ddl").isNull(), F.lit("message has no op (payload.op)")),
                (kind.isNull(), unknown("op", pick("op"))),
                ((op == "t") & table.isNull(), F.lit("TRUNCATE names no table (source.table)")),
                (kind.isin(NOOP, DDL), None),
                (table.isNull(), F.lit("message names no source table (source.table)")),
                (
                    (kind == UPSERT) & after.isNull(),
                    F.concat(F.lit("op '"), op, F.lit("' message has no after image")),
                ),
                (
                    (kind == DELETE) & before.isNull() & key_values.isNull(),
                    F.lit(
                        'The "before" field of DELETE message is null: the deleted key is '
                        "unknown. With the Debezium Postgres connector set the table's REPLICA "
                        "IDENTITY to FULL, or land the Kafka key with envelope: kafka"
                    ),
                ),
            ],
        )

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        return type_hint_from_schema(schema_hint)


def kafka_key_values(key: Column) -> Column:
    """Key columns from a Kafka key: ``{"schema":…,"payload":{…}}`` or a flat object, else null."""
    outer = F.from_json(key, KEY_SCHEMA)
    wrapped = outer.getItem("payload").isNotNull() & F.map_contains_key(outer, "schema")
    values = F.when(wrapped, F.from_json(outer.getItem("payload"), KEY_SCHEMA)).otherwise(outer)
    return F.when(F.size(F.coalesce(values, F.create_map())) > 0, values)
