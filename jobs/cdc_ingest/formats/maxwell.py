"""Maxwell's daemon JSON for MySQL (``maxwell-json``).

``{"database", "table", "type": "insert|update|delete|bootstrap-insert|...", "ts", "xid",
"xoffset", "commit", "position": "master.000003:1234", "primary_key_columns": [...],
"data": {row}, "old": {changed columns' previous values}}``. ``data`` is the row after an insert or
update and the deleted row of a delete; ``old`` holds only the columns an update changed (like
Canal's). DDL messages (``table-create``, ``table-alter``, ``table-drop``) carry the statement in
``sql`` and name their table in ``def``/``old``; bootstrap rows are snapshot rows.

Order: the binlog position (file number, offset), then the transaction (``xid``) and the row in it
(``xoffset``; the last row of a transaction carries ``commit: true`` and no ``xoffset``).
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DDL, DELETE, NOOP, UPSERT
from cdc_ingest.formats.base import Message, MessageDecoder, unknown
from cdc_ingest.formats.common import (
    epoch_millis,
    lookup,
    mark_inexact_numbers,
    non_empty,
    number,
    parse_error,
)

SCHEMA = (
    "database string, table string, type string, ts string, xid string, xoffset string, "
    "commit boolean, position string, primary_key_columns array<string>, "
    "data map<string,string>, old map<string,string>, sql string, "
    "def struct<table string>, _corrupt string"
)
SHAPE = "a JSON object with database, table, type and data"
OPS = {
    "insert": UPSERT,
    "update": UPSERT,
    "delete": DELETE,
    "bootstrap-insert": UPSERT,  # a snapshot row
    "bootstrap-start": NOOP,
    "bootstrap-complete": NOOP,
    "table-create": DDL,
    "table-alter": DDL,
    "table-drop": DDL,
    "database-create": NOOP,
    "database-alter": NOOP,
    "database-drop": NOOP,
    "heartbeat": NOOP,
}
# The last row of a transaction has no xoffset: it comes after every other row of it.
_LAST_IN_TRANSACTION = 1 << 62


class MaxwellDecoder(MessageDecoder):
    """Maxwell's daemon JSON (``maxwell-json``)."""

    name: ClassVar[str] = "maxwell-json"
    json_schema = SCHEMA
    image_json_paths: ClassVar[tuple[str, ...]] = ("$.data",)

    def message(self, m: Column, value: Column) -> Message:
        tombstone = value.isNull() | (F.trim(value) == "")
        op = F.lower(m.getField("type"))
        kind = F.when(tombstone, F.lit(NOOP)).otherwise(lookup(OPS, op))
        table = self.source_table(
            F.coalesce(m.getField("table"), m.getField("def").getField("table"))
        )
        position = m.getField("position")
        binlog_file = F.regexp_extract(position, r"\.(\d+):", 1)
        binlog_offset = F.regexp_extract(position, r":(\d+)$", 1)
        xoffset = F.coalesce(
            m.getField("xoffset").cast("bigint"),
            F.when(m.getField("commit"), F.lit(_LAST_IN_TRANSACTION)),
        )
        data = m.getField("data")
        return Message(
            op=F.when(tombstone, F.lit("tombstone")).otherwise(m.getField("type")),
            kind=kind,
            table=table,
            db=m.getField("database"),
            order=F.array(
                number(F.when(binlog_file != "", binlog_file)),
                number(F.when(binlog_offset != "", binlog_offset)),
                number(m.getField("xid")),
                number(xoffset),
            ),
            image=mark_inexact_numbers(data, value),
            key_names=non_empty(m.getField("primary_key_columns")),
            event_ms=epoch_millis(m.getField("ts")),
            ddl=F.when(kind == DDL, m.getField("sql")),
            before=F.when(op == "update", m.getField("old")),
            problems=[
                (tombstone, None),
                (m.getField("_corrupt").isNotNull(), parse_error(value, self.name, SHAPE)),
                (op.isNull(), F.lit("message has no type")),
                (kind.isNull(), unknown("type", m.getField("type"))),
                (kind.isin(NOOP, DDL), None),
                (table.isNull(), F.lit("message names no table")),
                (data.isNull(), F.concat(F.lit("type "), op, F.lit(" message has no 'data'"))),
            ],
        )
