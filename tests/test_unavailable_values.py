"""Debezium's placeholder for values it did not send (PostgreSQL TOAST) keeps the stored value."""

from __future__ import annotations

import base64
from typing import Any

TEXT = "__debezium_unavailable_value"
BYTES = base64.b64encode(TEXT.encode()).decode()
FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "name"},
    {"type": "string", "optional": True, "field": "doc"},
    {"type": "bytes", "optional": True, "field": "blob"},
]
SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "struct", "optional": True, "field": side, "fields": FIELDS}
        for side in ("before", "after")
    ],
}


def _change(op: str, after: dict[str, Any], lsn: int) -> dict[str, Any]:
    source = {"connector": "postgresql", "db": "shop", "schema": "public", "table": "docs"}
    payload = {
        "op": op,
        "ts_ms": lsn,
        "before": None,
        "after": after,
        "source": {**source, "ts_ms": lsn, "lsn": lsn},
    }
    return {"schema": SCHEMA, "payload": payload}


def test_a_placeholder_keeps_the_stored_value_and_the_other_columns_apply(lake):
    lake.add_pipeline("docs", "debezium-json", keys={"docs": ["id"]})
    blob = base64.b64encode(b"\x00\x01big").decode()
    lake.land(
        "docs",
        "001.json",
        [
            _change("c", {"id": 1, "name": "a", "doc": "long text", "blob": blob}, 10),
            _change("c", {"id": 2, "name": "b", "doc": "two", "blob": blob}, 11),
        ],
    )
    lake.run("docs")
    lake.land(
        "docs",
        "002.json",
        [
            _change("u", {"id": 1, "name": "a2", "doc": TEXT, "blob": BYTES}, 20),
            # In one batch: the placeholder takes the value of the key's earlier change.
            _change("c", {"id": 3, "name": "c", "doc": "three", "blob": None}, 21),
            _change("u", {"id": 3, "name": "c2", "doc": TEXT, "blob": None}, 22),
            # Nothing stored and nothing earlier: null, never the placeholder.
            _change("u", {"id": 4, "name": "d", "doc": TEXT, "blob": BYTES}, 23),
            _change("u", {"id": 2, "name": "b2", "doc": "new", "blob": BYTES}, 24),
        ],
    )

    summary = lake.run("docs")

    assert summary.dead_lettered == 0
    rows = {r["id"]: r for r in lake.rows("docs")}
    assert {i: (r["name"], r["doc"]) for i, r in rows.items()} == {
        1: ("a2", "long text"),
        2: ("b2", "new"),
        3: ("c2", "three"),
        4: ("d", None),
    }
    assert bytes(rows[1]["blob"]) == b"\x00\x01big" and bytes(rows[2]["blob"]) == b"\x00\x01big"
    assert rows[4]["blob"] is None


def test_a_placeholder_in_history_takes_the_versions_last_sent_value(lake):
    """``history: scd2``: a version whose change did not send a value holds the key's last value
    that was sent (the stored version's, or an earlier change's of the batch), never the
    placeholder; with none, null."""
    from datetime import datetime, timedelta

    lake.add_pipeline(
        "docs",
        "debezium-json",
        keys={"docs": ["id"]},
        table_options={"docs": {"history": "scd2"}},
    )
    lake.land(
        "docs",
        "001.json",
        [
            _change("c", {"id": 1, "name": "a", "doc": "long text", "blob": None}, 10),
            _change("c", {"id": 2, "name": "b", "doc": "two", "blob": None}, 11),
        ],
    )
    lake.run("docs")
    lake.land(
        "docs",
        "002.json",
        [
            _change("u", {"id": 1, "name": "a2", "doc": TEXT, "blob": None}, 20),
            _change("c", {"id": 3, "name": "c", "doc": "three", "blob": None}, 21),
            _change("u", {"id": 3, "name": "c2", "doc": TEXT, "blob": None}, 22),
            _change("u", {"id": 4, "name": "d", "doc": TEXT, "blob": None}, 23),
            _change("u", {"id": 2, "name": "b2", "doc": "new", "blob": None}, 24),
        ],
    )
    lake.run("docs")

    def at(ms: int) -> datetime:
        return datetime(1970, 1, 1) + timedelta(milliseconds=ms)

    versions = sorted(
        (r["id"], r["name"], r["doc"], r["_cdc_valid_from"])
        for r in lake.table("docs_history").collect()
    )
    assert versions == [
        (1, "a", "long text", at(10)),
        (1, "a2", "long text", at(20)),
        (2, "b", "two", at(11)),
        (2, "b2", "new", at(24)),
        (3, "c", "three", at(21)),
        (3, "c2", "three", at(22)),
        (4, "d", None, at(23)),
    ]
