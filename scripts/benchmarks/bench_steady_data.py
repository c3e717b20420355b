"""The steady bench's changes: Debezium JSON lines of ``shop.orders`` (no schema: their types are
inferred), and their landing in a batch's folder."""

from __future__ import annotations

import json
from pathlib import Path

TABLE = "orders"


def change(op: str, key: int, version: int, ts: int) -> str:
    """One Debezium JSON change of ``shop.orders`` (no schema: its types are inferred)."""
    before = None if op == "c" else {"id": key, "v": version - 1, "note": f"n{key}"}
    after = None if op == "d" else {"id": key, "v": version, "note": f"n{key}-{version}"}
    source = {"db": "shop", "table": TABLE, "ts_ms": ts}
    return json.dumps({"op": op, "ts_ms": ts, "before": before, "after": after, "source": source})


def steady_changes(rows: int, total: int, ts: int) -> list[str]:
    """Half updates of held keys, a quarter inserts of new keys, a quarter deletes of held keys."""
    updates, inserts = total // 2, total // 4
    deletes = total - updates - inserts
    lines = [change("u", k, 1, ts + k) for k in range(updates)]
    lines += [change("d", updates + k, 1, ts + updates + k) for k in range(deletes)]
    lines += [change("c", rows + k, 1, ts + total + k) for k in range(inserts)]
    return lines


def land(landing: Path, lines: list[str], files: int) -> None:
    landing.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        part = lines[f::files]
        (landing / f"part-{f:03d}.json").write_text("\n".join(part) + "\n")
