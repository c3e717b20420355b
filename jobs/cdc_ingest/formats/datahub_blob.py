"""Alibaba DataWorks / DataHub Blob topic messages (seed 002).

``{"schema": {"dataColumn": [{name, type}…], "primaryKey": […], "source": {dbName, schemaName,
tableName}}, "payload": {"op", "before": {"dataColumn": {…}}, "after": {"dataColumn": {…}},
"sequenceId", "timestamp": {"eventTime"}, "ddl": {"text", "ddlMeta"}}, "version"}``: one JSON
document per message, landed either as its text or as the Base64 of its UTF-8 bytes (a Blob record
is binary). Images are full rows typed by ``schema.dataColumn``.

An UPDATE is two messages sharing one ``sequenceId``: ``UPDATE_BEFOR`` (sic) with the old row and
``UPDATE_AFTER`` with the new one. The after image alone decides the new row, so the before image
changes nothing. Paimon's "aliyun-json" data also sends one ``UPDATE_AFTER`` (or ``UPDATE``)
carrying both images, which is the same upsert. Heartbeats (``MHEARTBEAT``) and transaction or
index control ops change no row; CREATE/ALTER/TRUNCATE/RENAME/ERASE are DDL (``payload.ddl.text``;
``ddlMeta`` is a serialized Java object and is never read).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DDL, DELETE, NOOP, UPSERT, ColumnType, TypeHint
from cdc_ingest.formats.base import Message, MessageDecoder, unknown
from cdc_ingest.formats.common import (
    DATAWORKS_CONTROL_OPS,
    DATAWORKS_DDL_OPS,
    JSON_OPTIONS,
    lookup,
    mark_inexact_numbers,
    non_empty,
    number,
    parse_error,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEMA = (
    "schema struct<source: map<string,string>, dataColumn: array<map<string,string>>, "
    "primaryKey: array<string>>, "
    "payload struct<op string, before: struct<dataColumn: map<string,string>>, "
    "after: struct<dataColumn: map<string,string>>, sequenceId string, "
    "timestamp map<string,string>, ddl string>, "
    "version string, "
    "_corrupt string"
)
SHAPE = "a JSON object with schema and payload {op, before, after}"
NOT_A_MESSAGE = "line is neither a JSON object nor the Base64 of one"
HINT_SCHEME = "datahub"

OPS = {
    "INSERT": UPSERT,
    "UPDATE_AFTER": UPSERT,
    "UPDATE": UPSERT,
    "DELETE": DELETE,
    **dict.fromkeys(
        (
            "UPDATE_BEFOR",
            "UPDATE_BEFORE",
            "MHEARTBEAT",
            *DATAWORKS_CONTROL_OPS,
        ),
        NOOP,
    ),
    **dict.fromkeys(DATAWORKS_DDL_OPS, DDL),
}

# The six StreamX field types of seed 002's "Field types" table.
DATAHUB_TYPES: dict[str, ColumnType] = {
    "BOOLEAN": ColumnType("boolean"),
    "DOUBLE": ColumnType("double"),
    "LONG": ColumnType("bigint"),
    "STRING": ColumnType("string"),
    "DATE": ColumnType("timestamp", "epoch_millis"),  # 13-digit epoch milliseconds
    "BYTES": ColumnType("binary", "base64"),
}
UNKNOWN_TYPE = ColumnType("string")  # an undocumented type keeps the value's text


def message_text(value: Column) -> Column:
    """The message's JSON text: the line itself, or the UTF-8 text its Base64 decodes to.

    A Blob record is the UTF-8 bytes of a JSON object, so dumps may hold it as text or, when the
    dumper treats the record as binary, as Base64. A JSON object's text always starts with ``{``;
    Base64 never does. A line that is neither decodes to null or to text not starting with ``{``.
    """
    trimmed = F.trim(value)
    decoded = F.trim(F.call_function("try_to_binary", trimmed, F.lit("base64")).cast("string"))
    return F.when(trimmed.startswith("{"), value).when(decoded.startswith("{"), decoded)


class DataHubBlobDecoder(MessageDecoder):
    """DataHub Blob JSON (DataWorks real-time sync to DataHub, Paimon's "aliyun-json")."""

    name: ClassVar[str] = "datahub-blob"
    # DataHub shards a table without a primary key by table name: kept as an append-only log.
    keyless_tables_append_only: ClassVar[bool] = True
    before_half_ops: ClassVar[tuple[str, ...]] = ("UPDATE_BEFOR", "UPDATE_BEFORE")
    image_json_paths: ClassVar[tuple[str, ...]] = (
        "$.payload.after.dataColumn",
        "$.payload.before.dataColumn",
    )

    def parse(self, records: DataFrame) -> DataFrame:
        with_text = records.withColumn("_text", message_text(F.col("value")))
        return with_text.withColumn("_m", F.from_json(F.col("_text"), SCHEMA, JSON_OPTIONS))

    def message(self, m: Column, value: Column) -> Message:
        text = F.col("_text")
        schema, payload = m.getField("schema"), m.getField("payload")
        source = schema.getField("source")
        op = payload.getField("op")
        kind = lookup(OPS, F.upper(op))
        before = payload.getField("before").getField("dataColumn")
        after = payload.getField("after").getField("dataColumn")
        # The before half of an update pair keeps its image: it names the key the row had.
        before_half = F.upper(op).isin(*self.before_half_ops)
        image = mark_inexact_numbers(
            F.when((kind == DELETE) | before_half, before).otherwise(after), text
        )
        table = self.source_table(source.getItem("tableName"))
        event_time = payload.getField("timestamp").getItem("eventTime").cast("bigint")
        # Full-sync rows carry eventTime -1 (Paimon's aliyun data): no source time, so no freshness.
        event_ms = F.when(event_time > 0, event_time)
        # ``ddl`` is read as text (an object, null, or Paimon's ``true``); only its text is used.
        ddl = F.get_json_object(payload.getField("ddl"), "$.text")
        return Message(
            op=op,
            kind=kind,
            table=table,
            order=F.array(number(payload.getField("sequenceId")), number(event_ms)),
            image=image,
            db=source.getItem("dbName"),
            schema=source.getItem("schemaName"),
            key_names=non_empty(schema.getField("primaryKey")),
            schema_hint=self.schema_hint(schema.getField("dataColumn")),
            event_ms=event_ms,
            ddl=F.when(kind == DDL, ddl),
            # Paimon's aliyun form: one UPDATE carrying both images.
            before=F.when(kind == UPSERT, before),
            # The decoded text replaces ``value``: type inference reads images from it with the
            # JSON paths above, which must work for Base64 lines too. Dead letters keep ``raw``.
            value=text,
            problems=[
                (value.isNull(), F.lit("record has no value")),
                (text.isNull(), F.lit(NOT_A_MESSAGE)),
                (m.getField("_corrupt").isNotNull(), parse_error(text, self.name, SHAPE)),
                (op.isNull(), F.lit("message has no payload.op")),
                (kind.isNull(), unknown("op", op)),
                (kind.isin(NOOP, DDL), None),
                (table.isNull(), F.lit("message names no table (schema.source.tableName)")),
                (
                    (kind == UPSERT) & after.isNull(),
                    F.concat(F.lit("op "), op, F.lit(" has no payload.after.dataColumn")),
                ),
                (
                    (kind == DELETE) & before.isNull(),
                    F.lit("op DELETE has no payload.before.dataColumn"),
                ),
            ],
        )

    @staticmethod
    def schema_hint(data_columns: Column) -> Column:
        """``datahub:[{name, type}…]`` from ``schema.dataColumn``, or null when it lists none.

        The list stays a list: a map built in Spark would fail the whole batch on a repeated name.
        """
        return F.when(
            F.size(F.coalesce(data_columns, F.array())) > 0,
            F.concat(F.lit(f"{HINT_SCHEME}:"), F.to_json(data_columns)),
        )

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        scheme, _, text = schema_hint.partition(":")
        if scheme != HINT_SCHEME:
            return None
        try:
            declared = json.loads(text)
        except json.JSONDecodeError:
            return None
        if not isinstance(declared, list):
            return None
        columns: dict[str, ColumnType] = {}
        for column in declared:
            if not isinstance(column, dict) or column.get("name") is None:
                continue
            type_name = str(column.get("type") or "").strip().upper()
            # The first declaration of a name wins, as for every other declared schema.
            columns.setdefault(str(column["name"]), DATAHUB_TYPES.get(type_name, UNKNOWN_TYPE))
        return TypeHint(columns)
