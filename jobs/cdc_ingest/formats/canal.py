"""Canal flat JSON: alibaba/canal ``canal-json`` and OceanBase OMS's Canal serialization (seed 001).

``{"database", "table", "type", "isDdl", "sql", "es", "ts", "pkNames", "data": [rows…],
"old": [changed columns' previous values…], "mysqlType": {col: type}, "sqlType": {col: code}}``.
One message carries several rows: each element of ``data`` is a change record of its own (its
``row_in_message`` is its index). UPDATE's ``data[i]`` is the full new row. Columns are typed by
``mysqlType`` (or ``sqlType``); plain Canal sends every value as a string, OMS as JSON values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DDL, DELETE, NOOP, UPSERT, ColumnType, TypeHint
from cdc_ingest.formats.base import Message, MessageDecoder, unknown
from cdc_ingest.formats.common import (
    lookup,
    mark_inexact_numbers,
    non_empty,
    number,
    parse_error,
)
from cdc_ingest.formats.oms_types import type_hint_from_names

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEMA = (
    "data array<map<string,string>>, old array<map<string,string>>, database string, "
    "table string, pkNames array<string>, isDdl string, type string, es string, ts string, "
    "sql string, mysqlType map<string,string>, sqlType map<string,string>, _corrupt string"
)
SHAPE = "a JSON object with database, table, type and data (an array of row objects)"
OPS = {
    "INSERT": UPSERT,
    "UPDATE": UPSERT,
    "INIT": UPSERT,  # initial load rows (canal-json with init)
    "DELETE": DELETE,
    **dict.fromkeys(("CREATE", "ALTER", "ERASE", "RENAME", "TRUNCATE", "CINDEX", "DINDEX"), DDL),
    **dict.fromkeys(
        (
            "QUERY",
            "HEARTBEAT",
            "TRANSACTION_BEGIN",
            "TRANSACTION_END",
            "GTID",
            "XACOMMIT",
            "XAROLLBACK",
        ),
        NOOP,
    ),
}


class CanalDecoder(MessageDecoder):
    """alibaba/canal flat messages (``canal-json``)."""

    name: ClassVar[str] = "canal-json"
    json_schema = SCHEMA
    # ``pkNames: []`` (a table without a primary key): kept as an append-only log, as Paimon does.
    keyless_tables_append_only: ClassVar[bool] = True
    image_json_paths: ClassVar[tuple[str, ...]] = ("$.data[0]",)

    def parse(self, records: DataFrame) -> DataFrame:
        # One change per element of ``data`` (its index is the change's ``row_in_message``).
        return (
            super()
            .parse(records)
            .select("*", F.posexplode_outer(F.col("_m").getField("data")).alias("_pos", "_row"))
        )

    def message(self, m: Column, value: Column) -> Message:
        row = F.col("_row")
        # A Kafka tombstone (null value) or an empty message changes nothing (as in Flink).
        tombstone = value.isNull() | (F.trim(value) == "")
        op = m.getField("type")
        is_ddl = F.lower(m.getField("isDdl")) == "true"
        kind = (
            F.when(tombstone, F.lit(NOOP))
            .when(is_ddl, F.lit(DDL))
            .otherwise(lookup(OPS, F.upper(op)))
        )
        table = self.source_table(m.getField("table"))
        mysql_type, sql_type = m.getField("mysqlType"), m.getField("sqlType")
        hint = F.when(
            F.size(F.coalesce(mysql_type, F.create_map())) > 0,
            F.concat(F.lit("mysql:"), F.to_json(mysql_type)),
        ).when(
            F.size(F.coalesce(sql_type, F.create_map())) > 0,
            F.concat(F.lit("jdbc:"), F.to_json(sql_type)),
        )
        return Message(
            op=F.when(tombstone, F.lit("tombstone")).otherwise(op),
            kind=kind,
            table=table,
            order=F.array(number(m.getField("es"))),
            image=mark_inexact_numbers(row, value),
            db=m.getField("database"),
            key_names=non_empty(m.getField("pkNames")),
            schema_hint=hint,
            event_ms=m.getField("es").cast("bigint"),
            ddl=F.when(kind == DDL, m.getField("sql")),
            row_in_message=F.coalesce(F.col("_pos"), F.lit(0)),
            # ``old[i]``: the changed columns' previous values of ``data[i]``.
            before=F.when(
                F.upper(op) == "UPDATE", F.element_at(m.getField("old"), F.col("_pos") + 1)
            ),
            problems=[
                (tombstone, None),
                (m.getField("_corrupt").isNotNull(), parse_error(value, self.name, SHAPE)),
                (op.isNull() & ~F.coalesce(is_ddl, F.lit(False)), F.lit("message has no type")),
                (kind.isNull(), unknown("type", op)),
                (kind.isin(NOOP, DDL), None),
                (table.isNull(), F.lit("message names no table")),
                (
                    row.isNull(),
                    F.concat(F.lit("type "), op, F.lit(" message has no rows in 'data'")),
                ),
            ],
        )

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        hint = type_hint_from_names(schema_hint)
        if hint is None:
            return None
        # Plain Canal writes binary values as ISO-8859-1 text and BIT(n) as a number.
        columns = {
            name: ColumnType("binary", "latin1") if ctype.encoding == "base64" else ctype
            for name, ctype in hint.columns.items()
        }
        for name, type_name in _declared_names(schema_hint).items():
            if type_name.strip().lower().startswith("bit"):
                columns[name] = ColumnType("bigint")
        return TypeHint(columns)


class OmsCanalDecoder(CanalDecoder):
    """OceanBase OMS's Canal serialization: typed JSON values, Base64 binary."""

    name: ClassVar[str] = "oms-canal"

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        return type_hint_from_names(schema_hint)


def _declared_names(schema_hint: str) -> dict[str, str]:
    import json

    scheme, _, text = schema_hint.partition(":")
    if scheme != "mysql":
        return {}
    try:
        declared = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return {k: str(v) for k, v in declared.items()} if isinstance(declared, dict) else {}
