"""Canal JSON messages written by hand for tests (one row of an ``id``, ``v`` or ``id``, ``qty``
table of ``shop``), and what a run's summary says of them per table."""

from __future__ import annotations

from typing import Any

TEXT = {"id": "INT", "v": "VARCHAR(10)"}
COUNTED = {"id": "INT", "qty": "INT"}


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


def typed_message(
    table: str,
    kind: str,
    data: dict[str, Any],
    es: int,
    types: dict[str, str],
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Canal ``kind`` of one row of ``shop.<table>`` keyed by ``id``, declaring the types (of
    ``types``) of the columns it carries; ``old``: the changed columns' values before it."""
    return {
        **canal_message(table, kind, data, es, {c: types[c] for c in data}),
        "old": [old] if old else None,
    }


def ddl_message(table: str, sql: str, kind: str, es: int) -> dict[str, Any]:
    """A Canal DDL message (``kind``: ALTER, CREATE, RENAME...) of ``shop.<table>``."""
    return {
        "data": None,
        "database": "shop",
        "es": es,
        "isDdl": True,
        "mysqlType": None,
        "old": None,
        "pkNames": None,
        "sql": sql,
        "table": table,
        "type": kind,
    }


def row_message(table: str, kind: str, data: dict[str, Any], es: int) -> dict[str, Any]:
    """``canal_message`` of an ``id``, ``qty`` row (``COUNTED``) or else an ``id``, ``v`` one."""
    return canal_message(table, kind, data, es, COUNTED if "qty" in data else TEXT)


def outcomes(summary: Any) -> dict[str, tuple[int, ...]]:
    """Per table: messages, inserted, updated, deleted, deleted absent, superseded, older, dead
    letters."""
    return {
        name: (
            t.messages,
            t.inserted,
            t.updated,
            t.deleted,
            t.deleted_absent,
            t.superseded,
            t.older,
            t.dead_lettered,
        )
        for name, t in summary.tables.items()
    }
