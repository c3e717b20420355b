"""Debezium change envelopes as Kafka Connect's S3 sinks write them, for the container tests.

The Avro files are written by fastavro with the schema Confluent's AvroConverter derives for a
Debezium MySQL table (``connect.name`` on each logical type); the Parquet files by pyarrow with
that schema in ``parquet.avro.schema``, as parquet-avro writers keep it. ``connect_json`` gives the
same change as Debezium's JSON converter writes it.
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

DECIMAL = {
    "type": "bytes",
    "scale": 2,
    "precision": 10,
    "logicalType": "decimal",
    "connect.version": 1,
    "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
    "connect.name": "org.apache.kafka.connect.data.Decimal",
}
DATE = {"type": "int", "connect.version": 1, "connect.name": "io.debezium.time.Date"}
MICROS = {"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.MicroTimestamp"}


def avro_schema(with_email: bool = False) -> dict[str, Any]:
    fields: list[dict[str, Any]] = [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": ["null", DECIMAL], "default": None},
        {"name": "born", "type": ["null", DATE], "default": None},
        {"name": "updated", "type": ["null", MICROS], "default": None},
    ]
    if with_email:
        fields.append({"name": "email", "type": ["null", "string"], "default": None})
    value = {
        "type": "record",
        "name": "Value",
        "namespace": "dbserver1.shop.customers",
        "fields": fields,
        "connect.name": "dbserver1.shop.customers.Value",
    }
    source = {
        "type": "record",
        "name": "Source",
        "namespace": "io.debezium.connector.mysql",
        "fields": [
            {"name": "connector", "type": "string"},
            {"name": "ts_ms", "type": "long"},
            {"name": "db", "type": "string"},
            {"name": "table", "type": ["null", "string"], "default": None},
            {"name": "file", "type": "string"},
            {"name": "pos", "type": "long"},
        ],
    }
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": "dbserver1.shop.customers",
        "fields": [
            {"name": "before", "type": ["null", value], "default": None},
            {"name": "after", "type": ["null", "dbserver1.shop.customers.Value"], "default": None},
            {"name": "source", "type": source},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
        ],
        "connect.name": "dbserver1.shop.customers.Envelope",
    }


def row(i: int, amount: str, email: str | None = None, with_email: bool = False) -> dict:
    image = {
        "id": i,
        "name": f"c{i}",
        "amount": Decimal(amount),
        "born": 19723 + i,  # 2024-01-02 (day 19724) for id 1
        "updated": 1_704_164_645_678_901 + i,  # 2024-01-02T03:04:05.678902 for id 1
    }
    if with_email:
        image["email"] = email
    return image


def change(op: str, before: dict | None, after: dict | None, pos: int) -> dict:
    return {
        "before": before,
        "after": after,
        "source": {
            "connector": "mysql",
            "ts_ms": 1_704_164_645_000 + pos,
            "db": "shop",
            "table": "customers",
            "file": "mysql-bin.000003",
            "pos": pos,
        },
        "op": op,
        "ts_ms": 1_704_164_646_000 + pos,
    }


FIRST = [
    change("c", None, row(1, "12.34"), 10),
    change("c", None, row(2, "5.00"), 20),
    change("u", row(1, "12.34"), row(1, "99.99"), 30),
    change("x", None, row(3, "1.00"), 35),  # an unknown op: a dead letter at record 4
]
SECOND = [
    change("d", row(2, "5.00", with_email=True), None, 40),
    change("c", None, row(4, "0.10", "d@x", with_email=True), 50),
]


def write_avro(path: Path, schema: dict, records: list[Any]) -> None:
    import fastavro

    with path.open("wb") as out:
        fastavro.writer(out, fastavro.parse_schema(schema), records)


def write_parquet(path: Path, schema: dict, records: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    value_fields = [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("born", pa.int32()),
        pa.field("updated", pa.int64()),
    ]
    if any("email" in (r["after"] or r["before"]) for r in records):
        value_fields.append(pa.field("email", pa.string()))
    value = pa.struct(value_fields)
    source = pa.struct(
        [
            ("connector", pa.string()),
            ("ts_ms", pa.int64()),
            ("db", pa.string()),
            ("table", pa.string()),
            ("file", pa.string()),
            ("pos", pa.int64()),
        ]
    )
    arrow_schema = pa.schema(
        [
            ("before", value),
            ("after", value),
            ("source", source),
            ("op", pa.string()),
            ("ts_ms", pa.int64()),
        ],
        metadata={"parquet.avro.schema": json.dumps(schema)},
    )
    pq.write_table(pa.Table.from_pylist(records, schema=arrow_schema), path)


def connect_json(message: dict, with_email: bool) -> str:
    """The same change as Debezium's JSON converter writes it (schema and payload)."""

    def image(values: dict | None) -> dict | None:
        if values is None:
            return None
        unscaled = int(values["amount"] * 100)
        encoded = base64.b64encode(unscaled.to_bytes(8, "big", signed=True).lstrip(b"\0") or b"\0")
        return {**values, "amount": encoded.decode()}

    fields = [
        {"type": "int64", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "field": "name"},
        {
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": "2", "connect.decimal.precision": "10"},
            "field": "amount",
        },
        {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "born"},
        {
            "type": "int64",
            "optional": True,
            "name": "io.debezium.time.MicroTimestamp",
            "field": "updated",
        },
    ]
    if with_email:
        fields.append({"type": "string", "optional": True, "field": "email"})
    schema = {
        "type": "struct",
        "fields": [
            {"type": "struct", "optional": True, "field": "before", "fields": fields},
            {"type": "struct", "optional": True, "field": "after", "fields": fields},
            {"type": "struct", "optional": False, "field": "source", "fields": []},
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
    }
    payload = {**message, "before": image(message["before"]), "after": image(message["after"])}
    return json.dumps({"schema": schema, "payload": payload})
