"""OceanBase OMS DataWorks 2.0 serialization (seed 001).

``{"version": "2.0", "schema": {"source": {dbName, schema, table}, "column": [{name, type}…],
"pk": […]}, "payload": {"before": {"data": {…}}, "after": {"data": {…}}, "op", "timestamp":
{"eventTime"}, "ddl": {"text"}, "scn"}}``. Images are full rows, typed by ``schema.column``.
Heartbeats and transaction/control ops change no row; CREATE/ALTER/ERASE/TRUNCATE/RENAME are DDL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DDL, DELETE, NOOP, UPSERT, TypeHint
from cdc_ingest.formats.base import Message, MessageDecoder, unknown
from cdc_ingest.formats.common import (
    DATAWORKS_CONTROL_OPS,
    DATAWORKS_DDL_OPS,
    lookup,
    mark_inexact_numbers,
    non_empty,
    number,
    parse_error,
)
from cdc_ingest.formats.oms_types import type_hint_from_names

if TYPE_CHECKING:
    pass

SCHEMA = (
    "version string, "
    "schema struct<source: map<string,string>, column: array<map<string,string>>, "
    "pk: array<string>>, "
    "payload struct<before: struct<data: map<string,string>>, "
    "after: struct<data: map<string,string>>, op string, timestamp map<string,string>, "
    "ddl map<string,string>, scn string>, "
    "_corrupt string"
)
SHAPE = "a JSON object with schema and payload {before, after, op}"
OPS = {
    "INSERT": UPSERT,
    "UPDATE": UPSERT,
    "DELETE": DELETE,
    **dict.fromkeys(("HEARTBEAT", *DATAWORKS_CONTROL_OPS), NOOP),
    **dict.fromkeys(DATAWORKS_DDL_OPS, DDL),
}


class OmsDataWorksDecoder(MessageDecoder):
    """OMS DataWorks 2.0 JSON."""

    name: ClassVar[str] = "oms-dataworks"
    json_schema = SCHEMA
    image_json_paths: ClassVar[tuple[str, ...]] = (
        "$.payload.after.data",
        "$.payload.before.data",
    )

    def message(self, m: Column, value: Column) -> Message:
        schema, payload = m.getField("schema"), m.getField("payload")
        source = schema.getField("source")
        op = payload.getField("op")
        kind = lookup(OPS, F.upper(op))
        before = payload.getField("before").getField("data")
        after = payload.getField("after").getField("data")
        image = mark_inexact_numbers(F.when(kind == DELETE, before).otherwise(after), value)
        table = self.source_table(source.getItem("table"))
        columns = schema.getField("column")
        types = F.map_from_entries(
            F.transform(
                F.filter(columns, lambda c: c.getItem("name").isNotNull()),
                lambda c: F.struct(c.getItem("name"), c.getItem("type")),
            )
        )
        hint = F.when(
            F.size(F.coalesce(columns, F.array())) > 0, F.concat(F.lit("mysql:"), F.to_json(types))
        )
        ddl = payload.getField("ddl").getItem("text")
        event_ms = payload.getField("timestamp").getItem("eventTime").cast("bigint")
        return Message(
            op=op,
            kind=kind,
            table=table,
            order=F.array(number(payload.getField("scn")), number(event_ms)),
            image=image,
            db=source.getItem("dbName"),
            schema=source.getItem("schema"),
            key_names=non_empty(schema.getField("pk")),
            schema_hint=hint,
            event_ms=event_ms,
            ddl=F.when(kind == DDL, ddl),
            before=F.when(kind == UPSERT, before),
            problems=[
                (m.getField("_corrupt").isNotNull(), parse_error(value, self.name, SHAPE)),
                (op.isNull(), F.lit("message has no payload.op")),
                (kind.isNull(), unknown("op", op)),
                (kind.isin(NOOP, DDL), None),
                (table.isNull(), F.lit("message names no table (schema.source.table)")),
                (
                    (kind == UPSERT) & after.isNull(),
                    F.concat(F.lit("op "), op, F.lit(" has no payload.after.data")),
                ),
                ((kind == DELETE) & before.isNull(), F.lit("op DELETE has no payload.before.data")),
            ],
        )

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        return type_hint_from_names(schema_hint)
