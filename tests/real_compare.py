"""Every table of a real database compared with its mirror, row by row, value by value.

The database's rows are read as JSON (PostgreSQL's ``row_to_json``, MariaDB's ``JSON_OBJECT``,
binaries as hex) with numbers kept as exact decimals; the mirror's through Spark. Both sides are
normalized by the column's kind (real_workloads.py), so that, say, 12.50 equals 12.5 and a
TIME(6)'s 01:02:03.000000 equals 01:02:03.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from real_workloads import Table


def _time(text: str) -> str:
    whole, _, fraction = text.partition(".")
    fraction = fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def _instant(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    parsed = datetime.fromisoformat(str(value).replace(" ", "T"))
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def normalized(kind: str, value: Any, side: str) -> Any:
    """A value as both sides agree on it (``side``: db or mirror)."""
    if value is None:
        return None
    if kind == "int":
        return int(value)
    if kind == "dec":
        return Decimal(str(value)).normalize()
    if kind == "float":
        return float(value)
    if kind == "bool":
        return bool(value)
    if kind == "date":
        return value.isoformat() if isinstance(value, date) else str(value)[:10]
    if kind in ("ts", "tstz"):
        return _instant(value)
    if kind == "time":
        return _time(str(value))
    if kind == "bytes":
        if side == "mirror":
            return bytes(value)
        text = str(value)
        return bytes.fromhex(text[2:] if text.startswith("\\x") else text)
    if kind == "json":
        return json.loads(value) if isinstance(value, str) else value
    return str(value)


def mirror_rows(spark: Any, identifier: str, table: Table) -> tuple[list[str], dict[Any, dict]]:
    frame = spark.table(identifier)
    columns = [c for c in frame.columns if not c.startswith("_cdc_")]
    rows = {}
    for row in frame.select(*[f"`{c}`" for c in columns]).collect():
        values = {c: normalized(table.kinds.get(c, "text"), row[c], "mirror") for c in columns}
        rows[tuple(values[k] for k in table.keys)] = values
    return columns, rows


def db_rows(documents: list[str], table: Table) -> dict[Any, dict]:
    rows = {}
    for text in documents:
        doc = json.loads(text, parse_float=Decimal)
        values = {c: normalized(table.kinds.get(c, "text"), v, "db") for c, v in doc.items()}
        rows[tuple(values[k] for k in table.keys)] = values
    return rows


def differences(db: dict[Any, dict], mirror: dict[Any, dict], limit: int = 5) -> list[str]:
    """What differs, key by key (at most ``limit`` lines)."""
    found = []
    for key in sorted(set(db) | set(mirror), key=repr):
        if db.get(key) != mirror.get(key):
            a, b = db.get(key) or {}, mirror.get(key) or {}
            if not a or not b:
                found.append(f"{key}: database {a or 'no row'}, mirror {b or 'no row'}")
            else:
                cells = [f"{c}: {a.get(c)!r} != {b.get(c)!r}" for c in a if a.get(c) != b.get(c)]
                found.append(f"{key}: {'; '.join(cells)}")
    return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])
