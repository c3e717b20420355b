"""Canal flat JSON: alibaba/canal ``canal-json`` and OceanBase OMS's Canal serialization (seed 001).

``{"database", "table", "type", "isDdl", "sql", "es", "ts", "pkNames", "data": [rows…],
"old": [changed columns' previous values…], "mysqlType": {col: type}, "sqlType": {col: code}}``.
One message carries several rows: each element of ``data`` is a change record of its own (its
``row_in_message`` is its index). UPDATE's ``data[i]`` is the full new row. Columns are typed by
``mysqlType`` (or ``sqlType``); plain Canal sends every value as a string, OMS as JSON values.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import functions as F

from cdc_ingest.formats.base import DDL, DELETE, NOOP, UPSERT, ColumnType, Decoder, TypeHint
from cdc_ingest.formats.common import (
    JSON_OPTIONS,
    lookup,
    mark_inexact_numbers,
    no_key_values,
    non_empty,
    number,
    parse_error,
)
from cdc_ingest.formats.oms_types import BY_NAME, BYTES, JDBC_TYPES, type_hint_from_names

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

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
# Columns whose declared type is binary (BIT aside: plain Canal sends BIT(n) as a number).
BINARY_MYSQL_TYPE = (
    r"^\s*("
    + "|".join(re.escape(n) for n, t in BY_NAME.items() if t == BYTES and n != "bit")
    + r")\s*(\(.*)?$"
)
BINARY_JDBC_TYPES = [str(code) for code, t in JDBC_TYPES.items() if t == BYTES]


class CanalDecoder(Decoder):
    """alibaba/canal flat messages (``canal-json``)."""

    name: ClassVar[str] = "canal-json"
    image_json_paths: ClassVar[tuple[str, ...]] = ("$.data[0]",)
    #: Plain Canal writes binary values as the ISO-8859-1 decoding of their bytes.
    latin1_binary: ClassVar[bool] = True

    def decode(self, records: DataFrame) -> DataFrame:
        value = F.col("value")
        parsed = records.withColumn("_m", F.from_json(value, SCHEMA, JSON_OPTIONS)).select(
            "*", F.posexplode_outer(F.col("_m").getField("data")).alias("_pos", "_row")
        )
        m, row = F.col("_m"), F.col("_row")
        # A Kafka tombstone (null value) or an empty message changes nothing (as in Flink).
        tombstone = value.isNull() | (F.trim(value) == "")
        op = m.getField("type")
        is_ddl = F.lower(m.getField("isDdl")) == "true"
        kind = (
            F.when(tombstone, F.lit(NOOP))
            .when(is_ddl, F.lit(DDL))
            .otherwise(lookup(OPS, F.upper(op)))
        )
        table = m.getField("table")
        mysql_type, sql_type = m.getField("mysqlType"), m.getField("sqlType")
        if self.latin1_binary:
            row = _binary_as_base64(row, mysql_type, sql_type)
        hint = F.when(
            F.size(F.coalesce(mysql_type, F.create_map())) > 0,
            F.concat(F.lit("mysql:"), F.to_json(mysql_type)),
        ).when(
            F.size(F.coalesce(sql_type, F.create_map())) > 0,
            F.concat(F.lit("jdbc:"), F.to_json(sql_type)),
        )
        error = (
            F.when(tombstone, F.lit(None))
            .when(m.getField("_corrupt").isNotNull(), parse_error(value, self.name, SHAPE))
            .when(op.isNull() & ~F.coalesce(is_ddl, F.lit(False)), F.lit("message has no type"))
            .when(kind.isNull(), F.concat(F.lit("unknown type '"), op, F.lit("'")))
            .when(kind.isin(NOOP, DDL), F.lit(None))
            .when(table.isNull(), F.lit("message names no table"))
            .when(
                row.isNull(),
                F.concat(F.lit("type "), op, F.lit(" message has no rows in 'data'")),
            )
        )
        return parsed.select(
            *records.columns,
            m.getField("database").alias("src_db"),
            F.lit(None).cast("string").alias("src_schema"),
            table.alias("src_table"),
            F.when(tombstone, F.lit("tombstone")).otherwise(op).alias("op"),
            kind.alias("kind"),
            F.array(number(m.getField("es"))).alias("order"),
            mark_inexact_numbers(row, value).alias("image"),
            non_empty(m.getField("pkNames")).alias("key_names"),
            no_key_values().alias("key_values"),
            hint.alias("schema_hint"),
            error.alias("error"),
            m.getField("es").cast("bigint").alias("event_ms"),
            F.when(kind == DDL, m.getField("sql")).alias("ddl"),
            F.coalesce(F.col("_pos"), F.lit(0)).alias("row_in_message"),
        )

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        hint = type_hint_from_names(schema_hint)
        if hint is None:
            return None
        # Binary values arrive Base64-encoded by decode(); BIT(n) is a number in plain Canal.
        columns = dict(hint.columns)
        for name, type_name in _declared_names(schema_hint).items():
            if type_name.strip().lower().startswith("bit"):
                columns[name] = ColumnType("bigint")
        return TypeHint(columns)


class OmsCanalDecoder(CanalDecoder):
    """OceanBase OMS's Canal serialization: typed JSON values, Base64 binary."""

    name: ClassVar[str] = "oms-canal"
    latin1_binary: ClassVar[bool] = False

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        return type_hint_from_names(schema_hint)


def _binary_as_base64(row: Column, mysql_type: Column, sql_type: Column) -> Column:
    """``row`` with the ISO-8859-1 text of binary columns re-encoded as Base64 (the shared typing
    reads binary columns as Base64), binary meaning what the message's type hint declares."""
    by_mysql = F.size(F.coalesce(mysql_type, F.create_map())) > 0

    def encode(name: Column, v: Column) -> Column:
        binary = F.when(
            by_mysql, F.lower(F.element_at(mysql_type, name)).rlike(BINARY_MYSQL_TYPE)
        ).otherwise(F.element_at(sql_type, name).isin(*BINARY_JDBC_TYPES))
        return F.when(
            F.coalesce(binary, F.lit(False)), F.base64(F.encode(v, "ISO-8859-1"))
        ).otherwise(v)

    return F.transform_values(row, encode)


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
