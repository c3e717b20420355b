"""What `make demo` prints at the end: per pipeline what its batch did, each mirror's rows as a
small aligned table, and where to look next. Read back with pyiceberg, as a user would."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

MAX_ROWS, MAX_COLUMNS, MAX_WIDTH = 5, 7, 22
SYSTEM_PREFIX = "_cdc"


def aligned(header: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "  ") -> str:
    """A plain-text table: columns padded to their widest cell, numbers right-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    numeric = [all(_is_number(r[i]) for r in rows) and bool(rows) for i in range(len(header))]

    def line(values: Sequence[str]) -> str:
        return (
            indent
            + "  ".join(
                v.rjust(w) if num else v.ljust(w)
                for v, w, num in zip(values, widths, numeric, strict=True)
            ).rstrip()
        )

    rule = indent + "  ".join("-" * w for w in widths)
    return "\n".join([line([str(h) for h in header]), rule, *(line(r) for r in cells)])


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value: object) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= MAX_WIDTH else text[: MAX_WIDTH - 1] + "…"


def batch_totals(summaries: Sequence[dict[str, Any]]) -> dict[str, int]:
    """One pipeline's batches added up: files, lines, rows in/up/del, dead letters, DDL."""
    totals = dict.fromkeys(
        ("files", "lines", "inserted", "updated", "deleted", "dead_lettered", "ddl_applied"), 0
    )
    for s in summaries:
        totals["files"] += len(s.get("files") or [])
        totals["lines"] += s.get("lines") or 0
        totals["dead_lettered"] += s.get("dead_lettered") or 0
        totals["ddl_applied"] += s.get("ddl_applied") or 0
        for table in (s.get("tables") or {}).values():
            for key in ("inserted", "updated", "deleted"):
                totals[key] += table.get(key) or 0
    return totals


def report(lake: Any, pipelines: Sequence[dict[str, Any]]) -> str:
    """The whole end-of-demo report for ``pipelines`` (their pipelines.yaml entries)."""
    rows, mirrors = [], []
    for p in pipelines:
        namespace = str(p["namespace"])
        tables = sorted(t[-1] for t in lake.list_tables(namespace))
        batches = lake.load_table((namespace, "_cdc_batches")).scan().to_arrow().to_pylist()
        summaries = [json.loads(b["summary"]) for b in batches if b["pipeline"] == p["name"]]
        totals = batch_totals(summaries)
        rows.append([p["name"], p["format"], *totals.values()])
        for table in (t for t in tables if not t.startswith(SYSTEM_PREFIX)):
            mirrors.append(_mirror(lake, namespace, table))
    header = ["pipeline", "format", "files", "lines", "ins", "upd", "del", "dead", "ddl"]
    return "\n\n".join(["What each pipeline applied:", aligned(header, rows), *mirrors])


def _mirror(lake: Any, namespace: str, table: str) -> str:
    arrow = lake.load_table((namespace, table)).scan().to_arrow()
    columns = [c for c in arrow.column_names if not c.startswith(SYSTEM_PREFIX)]
    shown = columns[:MAX_COLUMNS]
    more = f", {len(columns) - len(shown)} more columns" if len(columns) > len(shown) else ""
    records = arrow.select(shown).to_pylist()[:MAX_ROWS]
    title = f"{namespace}.{table}: {arrow.num_rows} rows{more}"
    if not records:
        return title
    return title + "\n" + aligned(shown, [[r[c] for c in shown] for r in records])
