"""Message builders for the scenario suite: the same logical change in every format's shape."""

from __future__ import annotations

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


FORMATS: dict[str, dict[str, Any]] = {
    "lindorm": {"build": lindorm, "options": {"keys": {TABLE: [KEY]}}},
    "debezium-json": {"build": debezium, "options": {"keys": {TABLE: [KEY]}}},
    "arcion": {"build": arcion, "options": {"envelope": "kafka"}},
}


class Changes:
    """Builds one format's messages with increasing offsets."""

    def __init__(self, fmt: str) -> None:
        self.build = FORMATS[fmt]["build"]
        self.offset = 0

    def _next(self, op: str, before: dict | None, after: dict | None, ts: int) -> str:
        self.offset += 1
        return json.dumps(self.build(op, before, after, ts, self.offset))

    def insert(self, row: dict, ts: int) -> str:
        return self._next("c", None, row, ts)

    def update(self, before: dict, after: dict, ts: int) -> str:
        return self._next("u", before, after, ts)

    def delete(self, row: dict, ts: int) -> str:
        return self._next("d", row, None, ts)
