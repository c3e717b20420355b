"""Message builders for the scenario suite: the same logical change in every format's shape."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

TABLE = "accounts"
KEY = "id"


def _debezium_payload(
    op: str, before: dict | None, after: dict | None, ts: int, db_field: dict
) -> dict:
    return {
        "op": op,
        "ts_ms": ts + 5,
        "before": before,
        "after": after,
        "source": {**db_field, "table": TABLE, "ts_ms": ts},
    }


def lindorm(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    payload = _debezium_payload(
        op, before, after, ts, {"version": "v1.0", "db": "ld-test", "namespace": "default"}
    )
    return {"schema": {}, "payload": payload}


def debezium(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    return _debezium_payload(
        op, before, after, ts, {"connector": "mysql", "db": "shop", "snapshot": "false"}
    )


ARCION_SCHEMA = {
    "type": "struct",
    "optional": False,
    "fields": [
        {
            "type": "struct",
            "optional": False,
            "field": side,
            "fields": [
                {"type": "int32", "optional": False, "field": "id"},
                {"type": "string", "optional": True, "field": "owner"},
                {"type": "int64", "optional": True, "field": "balance"},
            ],
        }
        for side in ("before", "after")
    ],
}


def arcion(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    row = after or before or {}
    key = {
        "schema": {
            "type": "struct",
            "fields": [{"type": "int32", "optional": False, "field": "id"}],
        },
        "payload": {"id": str(row["id"])},
    }
    value = {
        "schema": ARCION_SCHEMA,
        "payload": {
            "before": before,
            "after": after,
            "op": op,
            "ts_ms": ts + 5,
            "source": {
                "connector": "MYSQL",
                "db": "bank",
                "table": TABLE,
                "snapshot": "false",
                "ts_ms": ts,
                "file": "log-bin.000001",
                "pos": ts,
                "row": 1,
            },
        },
    }
    return {
        "topic": "bank.accounts",
        "partition": 0,
        "offset": offset,
        "timestamp": ts,
        "key": key,
        "value": value,
    }


OMS_RECORD_TYPES = {"c": "INSERT", "u": "UPDATE", "d": "DELETE"}
LIGHT_TYPES = {"id": "INT", "owner": "VARCHAR", "balance": "BIGINT"}
MYSQL_TYPES = {"id": "int(11)", "owner": "varchar(32)", "balance": "bigint(20)"}
JDBC_TYPES = {"id": 4, "owner": 12, "balance": -5}


def oms_default(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    row = after or before or {}
    return {
        "allMetaData": {
            "checkpoint": str(ts // 1000),
            "record_primary_key": KEY,
            "record_primary_value": str(row[KEY]),
            "dbType": "OB_MYSQL",
            "storeDataSequence": ts * 100000 + offset,
            "table_name": TABLE,
            "db": "tenant1.bank",
            "timestamp": str(ts // 1000),
        },
        "prevStruct": before,
        "postStruct": after,
        "recordType": OMS_RECORD_TYPES[op],
    }


def oms_default_extend(
    op: str, before: dict | None, after: dict | None, ts: int, offset: int
) -> Any:
    light = {name: {"schemaType": t} for name, t in LIGHT_TYPES.items()}
    message = oms_default(op, before, after, ts, offset)
    for image in ("prevStruct", "postStruct"):
        if message[image] is not None:
            message[image] = {**message[image], "__light_type": light}
    return message


def canal(
    op: str, before: dict | None, after: dict | None, ts: int, offset: int, strings: bool = True
) -> Any:
    row = after if op != "d" else before
    assert row is not None

    def text(r: dict) -> dict:
        return {k: None if v is None else str(v) for k, v in r.items()} if strings else r

    old = None
    if op == "u" and before is not None and after is not None:
        old = [text({k: v for k, v in before.items() if after.get(k) != v})]
    return {
        "data": [text(row)],
        "database": "bank",
        "es": ts,
        "id": offset,
        "isDdl": False,
        "mysqlType": MYSQL_TYPES,
        "old": old,
        "pkNames": [KEY],
        "sql": "",
        "sqlType": JDBC_TYPES,
        "table": TABLE,
        "ts": ts + 5,
        "type": OMS_RECORD_TYPES[op],
    }


def oms_canal(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    return canal(op, before, after, ts, offset, strings=False)


def oms_dataworks(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    return {
        "version": "2.0",
        "schema": {
            "source": {"dbType": "ob_mysql", "dbName": "bank", "schema": None, "table": TABLE},
            "column": [{"name": n, "type": t} for n, t in LIGHT_TYPES.items()],
            "pk": [KEY],
        },
        "payload": {
            "before": {"data": before} if before is not None else None,
            "after": {"data": after} if after is not None else None,
            "op": OMS_RECORD_TYPES[op],
            "timestamp": {"eventTime": ts, "systemTime": ts + 5, "checkpointTime": ts // 1000},
            "ddl": None,
            "scn": str(ts),
        },
    }


def oms_shareplex(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    meta = {
        "op": {"c": "ins", "u": "upd", "d": "del"}[op],
        "table": f"bank.{TABLE}",
        "scn": str(ts),
        "seq": 1,
        "time": "2020-11-25T00:01:02",
        "trans": f"t{offset}",
    }
    if op == "u":
        assert before is not None and after is not None
        changed = {k: v for k, v in after.items() if before.get(k) != v}
        return {"data": changed, "meta": meta, "key": before}
    return {"data": after if op == "c" else before, "meta": meta}


def datahub_tuple(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    def record(row: dict | None, operation: str, images: tuple[str, str]) -> dict:
        return {
            **(row or {}),
            "_sequence_id_": str(ts * 1000),
            "_operation_type_": operation,
            "_excute_time_": ts,
            "_source_table_": TABLE,
            "_before_image_": images[0],
            "_after_image_": images[1],
        }

    if op == "u":  # an update is two records: the before image, then the after image
        return [record(before, "U", ("Y", "N")), record(after, "U", ("N", "Y"))]
    if op == "c":
        return record(after, "I", ("N", "Y"))
    return record(before, "D", ("Y", "N"))


def aerospike(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    row = after or before or {}
    digest = base64.b64encode(f"digest-{row[KEY]}".encode()).decode()
    meta = {"namespace": "bank", "digest": digest, "gen": offset, "lut": ts}
    if op == "d":  # as in seed 004: a delete carries no set and no bins
        return {"metadata": {"msg": "delete", **meta, "durable": False}}
    return {"metadata": {"msg": "write", "set": TABLE, "userKey": row[KEY], **meta}, **row}


DATAHUB_TYPES = {"id": "LONG", "owner": "STRING", "balance": "LONG"}
DATAHUB_OPS = {"c": "INSERT", "u": "UPDATE_AFTER", "d": "DELETE"}


def datahub_blob(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    """A DataHub Blob message; an update is two: UPDATE_BEFOR, then UPDATE_AFTER."""
    if op == "u":
        both = datahub_blob("c", before, after, ts, offset)
        payload = both["payload"]
        return [
            {**both, "payload": {**payload, "op": "UPDATE_BEFOR", "after": None}},
            {**both, "payload": {**payload, "op": "UPDATE_AFTER", "before": None}},
        ]
    return {
        "schema": {
            "dataColumn": [{"name": n, "type": t} for n, t in DATAHUB_TYPES.items()],
            "primaryKey": [KEY],
            "source": {"dbName": "bank", "dbType": "MySQL", "tableName": TABLE},
        },
        "payload": {
            "op": DATAHUB_OPS[op],
            "before": {"dataColumn": before} if before is not None else None,
            "after": {"dataColumn": after} if after is not None else None,
            # Like the seed's sequenceIds: the source time in ms, then a six-digit counter.
            "sequenceId": f"{ts}{offset:06d}",
            "timestamp": {"eventTime": ts, "systemTime": ts + 5, "checkpointTime": ts},
        },
        "version": "0.0.1",
    }


def keyless_blob_insert(row: dict) -> dict:
    """A DataHub Blob INSERT into ``logs.events``, a table without a primary key."""
    return {
        "schema": {
            "dataColumn": [{"name": "id", "type": "LONG"}, {"name": "note", "type": "STRING"}],
            "source": {"dbName": "logs", "tableName": "events"},
        },
        "payload": {
            "op": "INSERT",
            "after": {"dataColumn": row},
            "sequenceId": "1",
            "timestamp": {"eventTime": 1605339932000},
        },
    }


def maxwell(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    message: dict[str, Any] = {
        "database": "bank",
        "table": TABLE,
        "type": {"c": "insert", "u": "update", "d": "delete"}[op],
        "ts": ts // 1000,
        "xid": ts,
        "commit": True,
        "position": f"master.000001:{ts}",
        "primary_key_columns": [KEY],
        "data": after if op != "d" else before,
    }
    if op == "u" and before is not None and after is not None:
        message["old"] = {k: v for k, v in before.items() if after.get(k) != v}
    return message


def ogg(op: str, before: dict | None, after: dict | None, ts: int, offset: int) -> Any:
    op_ts = dt.datetime.fromtimestamp(ts / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    message: dict[str, Any] = {
        "table": f"BANK.{TABLE}",
        "op_type": {"c": "I", "u": "U", "d": "D"}[op],
        "op_ts": op_ts,
        "pos": f"{ts:020d}",
        "primary_keys": [KEY],
    }
    if before is not None:
        message["before"] = before
    if after is not None:
        message["after"] = after
    return message


FORMATS: dict[str, dict[str, Any]] = {
    "lindorm": {"build": lindorm, "options": {"keys": {TABLE: [KEY]}}},
    "debezium-json": {"build": debezium, "options": {"keys": {TABLE: [KEY]}}},
    "arcion": {"build": arcion, "options": {"envelope": "kafka"}},
    "oms-default": {"build": oms_default, "options": {}},
    "oms-default-extend": {"build": oms_default_extend, "options": {}},
    "oms-canal": {"build": oms_canal, "options": {}},
    "canal-json": {"build": canal, "options": {}},
    "oms-dataworks": {"build": oms_dataworks, "options": {}},
    "oms-shareplex": {"build": oms_shareplex, "options": {"keys": {TABLE: [KEY]}}},
    "datahub-tuple": {"build": datahub_tuple, "options": {"keys": {TABLE: [KEY]}}},
    "aerospike": {"build": aerospike, "options": {}},
    "datahub-blob": {"build": datahub_blob, "options": {}},
    "maxwell-json": {"build": maxwell, "options": {}},
    "ogg-json": {"build": ogg, "options": {}},
}


class Changes:
    """Builds one format's messages with increasing offsets."""

    def __init__(self, fmt: str) -> None:
        self.build = FORMATS[fmt]["build"]
        self.offset = 0

    def _next(self, op: str, before: dict | None, after: dict | None, ts: int) -> str:
        """One change as landed text: one line, or several for formats that split a change."""
        self.offset += 1
        message = self.build(op, before, after, ts, self.offset)
        if isinstance(message, list):
            return "\n".join(json.dumps(m) for m in message)
        return json.dumps(message)

    def insert(self, row: dict, ts: int) -> str:
        return self._next("c", None, row, ts)

    def update(self, before: dict, after: dict, ts: int) -> str:
        return self._next("u", before, after, ts)

    def delete(self, row: dict, ts: int) -> str:
        return self._next("d", row, None, ts)
