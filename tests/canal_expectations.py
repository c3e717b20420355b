"""Expectations of the Canal conformance tests: peers' expected files, changelog replay, checks.

Peers emit changelogs (+I/-U/+U/-D); cdc-ingest mirrors tables, so each expected changelog is
replayed by key into the table it leaves behind and compared with the final Iceberg table.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import CONFORMANCE, FIXTURES, Lake

CANAL = FIXTURES / "canal-json"
FLINK = CONFORMANCE / "flink" / "expected"
SEATUNNEL = CONFORMANCE / "seatunnel" / "expected"
RISINGWAVE = CONFORMANCE / "risingwave" / "expected"
PAIMON = CONFORMANCE / "paimon" / "expected"
PAIMON_INPUT = CANAL / "paimon"


def expected(path: Path) -> Any:
    return json.loads(path.read_text())


def json_lines(path: Path) -> list[str]:
    """The lines of a landed dump that are JSON (Paimon's files open with a license comment)."""
    lines = []
    for line in path.read_text().splitlines():
        try:
            json.loads(line)
        except ValueError:
            continue
        lines.append(line)
    return lines


def final_table(changelog: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """The table a changelog leaves behind: +I/+U rows kept, -U/-D rows removed, by key."""
    rows: dict[tuple, dict] = {}
    for change in changelog:
        row = change["row"]
        key = tuple(row[k] for k in keys)
        if change["op"] in ("+I", "+U"):
            rows[key] = row
        else:
            rows.pop(key, None)
    return list(rows.values())


def typed_like(rows: list[dict], schema: Any) -> list[dict]:
    """Expected rows with text dates, timestamps and decimals as the mirror's Python types."""
    types = {f.name: f.dataType.simpleString() for f in schema.fields}

    def convert(value: Any, spark_type: str) -> Any:
        if value is None:
            return None
        if spark_type == "date" and isinstance(value, str):
            return dt.date.fromisoformat(value)
        if spark_type.startswith("timestamp") and isinstance(value, str):
            return dt.datetime.fromisoformat(value)
        if spark_type.startswith("decimal") and isinstance(value, str | int | float):
            return Decimal(str(value))
        return value

    return [{k: convert(v, types[k]) for k, v in row.items()} for row in rows]


def assert_table(lake: Lake, table: str, rows: list[dict], keys: tuple[str, ...], **kw) -> None:
    """The table's rows (the expected rows' columns) equal ``rows``; floats approximately."""
    columns = list(rows[0]) if rows else list(keys)
    frame = lake.table(table, **kw).select(*columns)
    want = typed_like(rows, frame.schema)
    got = [r.asDict() for r in frame.collect()]

    def by_key(row: dict) -> tuple:
        return tuple(str(row[k]) for k in keys)

    def close(row: dict) -> dict:  # FLOAT columns are doubles here
        return {
            k: pytest.approx(v, nan_ok=True) if isinstance(v, float) else v for k, v in row.items()
        }

    assert sorted(got, key=by_key) == [close(r) for r in sorted(want, key=by_key)]


def records(changelog: list[dict]) -> int:
    """Change records behind a changelog: one per +I, +U (after its -U) and -D."""
    return sum(change["op"] != "-U" for change in changelog)
