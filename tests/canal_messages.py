"""Canal JSON messages written by hand for tests: one row of an ``id``, ``v`` table of ``shop``."""

from __future__ import annotations

from typing import Any

TEXT = {"id": "INT", "v": "VARCHAR(10)"}


def canal_message(
    table: str, kind: str, data: dict[str, Any], es: int, types: dict[str, str] = TEXT
) -> dict[str, Any]:
    """A Canal ``kind`` (INSERT, UPDATE, DELETE) of one row of ``shop.<table>``, keyed by ``id``;
    ``types``: its MySQL column types (default: ``id`` INT, ``v`` VARCHAR(10))."""
    return {
        "data": [data],
        "database": "shop",
        "es": es,
        "isDdl": False,
        "mysqlType": types,
        "old": None,
        "pkNames": ["id"],
        "sql": "",
        "table": table,
        "type": kind,
    }
