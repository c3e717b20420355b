"""Debezium change events as a real connector's JSON converter writes them (schemas enabled).

The field schemas are copied from events Debezium 3.6.1's PostgreSQL connector and 3.5.0's
MariaDB connector wrote in this project's real-producer runs (tests/test_real_producers.py); a
test names each column's Connect schema and the values, and gets the line a connector lands.
"""

from __future__ import annotations

import json
from typing import Any

INT32 = {"type": "int32", "optional": False}
INT64 = {"type": "int64", "optional": True}
STRING = {"type": "string", "optional": True}
VARIABLE_SCALE_DECIMAL = {
    "type": "struct",
    "fields": [
        {"type": "int32", "optional": False, "field": "scale"},
        {"type": "bytes", "optional": False, "field": "value"},
    ],
    "optional": True,
    "name": "io.debezium.data.VariableScaleDecimal",
    "version": 1,
    "doc": "Variable scaled decimal",
}
MICRO_TIME = {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTime", "version": 1}


def decimal(precision: int, scale: int) -> dict[str, Any]:
    """Connect's Decimal as Debezium declares a DECIMAL(precision, scale) column."""
    return {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": str(scale), "connect.decimal.precision": str(precision)},
    }


def source(table: str, position: int, db: str = "shop") -> dict[str, Any]:
    """A MariaDB connector's source block at binlog position ``position``."""
    return {
        "version": "3.5.0.Final",
        "connector": "mariadb",
        "name": "mdb",
        "ts_ms": 1795840968000,
        # While streaming, MariaDB's connector 3.5.0 sends none (null).
        "snapshot": None,
        "db": db,
        "table": table,
        "server_id": 1,
        "gtid": None,
        "file": "binlog.000001",
        "pos": position,
        "row": 0,
    }


def change(
    table: str,
    columns: dict[str, dict[str, Any]],
    op: str,
    after: dict[str, Any] | None,
    before: dict[str, Any] | None = None,
    position: int = 1000,
) -> dict[str, Any]:
    """One change event's value, ``{"schema", "payload"}``, for a table of these columns."""
    row = {
        "type": "struct",
        "fields": [{**schema, "field": name} for name, schema in columns.items()],
        "optional": True,
        "name": f"mdb.shop.{table}.Value",
    }
    envelope = {
        "type": "struct",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {"type": "struct", "fields": [], "optional": False, "field": "source"},
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
        "optional": False,
        "name": f"mdb.shop.{table}.Envelope",
        "version": 2,
    }
    payload = {
        "before": before,
        "after": after,
        "source": source(table, position),
        "op": op,
        "ts_ms": 1795840968500,
    }
    return {"schema": envelope, "payload": payload}


def line(value: dict[str, Any]) -> str:
    """The value as one landed line (value-only landing, as the S3 sink's JSON format)."""
    return json.dumps(value, separators=(",", ":"))


SCHEMA_CHANGE_KEY = {
    "type": "struct",
    "fields": [{"type": "string", "optional": False, "field": "databaseName"}],
    "optional": False,
    "name": "io.debezium.connector.mariadb.SchemaChangeKey",
    "version": 1,
}


def schema_change(
    statement: str, position: int, table: str | None, snapshot: str | None = None, ts_ms: int = 0
) -> dict[str, Any]:
    """A schema-change topic event's value (the MariaDB connector's ``include.schema.changes``);
    a snapshot's statements carry the time the connector wrote them."""
    src = {**source(table or "", position), "snapshot": snapshot, "table": table}
    if ts_ms:
        src["ts_ms"] = ts_ms
    payload = {
        "source": src,
        "ts_ms": ts_ms or 1795840968500,
        "databaseName": "shop",
        "schemaName": None,
        "ddl": statement,
        "tableChanges": [],
    }
    return {"schema": {"type": "struct", "fields": [], "optional": False}, "payload": payload}


def kafka_record(topic: str, offset: int, key: Any, value: Any) -> str:
    """One line of ``envelope: kafka`` landing: the record with its topic and offset."""
    record = {
        "topic": topic,
        "partition": 0,
        "offset": offset,
        "timestamp": 1795840970000,
        "key": key,
        "value": value,
    }
    return json.dumps(record, separators=(",", ":"))


def landed_name(topic: str, first_offset: int) -> str:
    """Where the S3 sink lands a topic's file: ``topics/<t>/partition=0/<t>+0+<offset>.json``."""
    return f"topics/{topic}/partition=0/{topic}+0+{first_offset:010d}.json"
