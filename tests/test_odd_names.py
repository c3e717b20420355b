"""Column names are quoted everywhere (issue 51, defect 9): one change naming a column with a
backtick among plain ones once dead-lettered its whole batch with Spark's "Syntax error in
attribute name", and every later batch of its table."""

from __future__ import annotations

import json

import pytest


def _insert(row: dict[str, object]) -> str:
    message = {
        "before": None,
        "after": row,
        "source": {"db": "shop", "table": "customers", "ts_ms": 1},
        "op": "c",
        "ts_ms": 1,
    }
    return json.dumps(message)


@pytest.mark.parametrize("alone", [False, True], ids=["in a group", "alone"])
def test_a_column_named_with_a_backtick(lake, monkeypatch, alone):
    """In a table applied in a group, and in one applied by a plan of its own (where the real
    run failed, with 100,000 changes: here the group's row limit is lowered instead)."""
    from cdc_ingest.apply import alone_tables, batch

    plain, applied_alone = 20, list[str]()
    if alone:
        lake.route_at(group_rows=plain)

    def spied(ctx, tables, *args, **kwargs):
        applied_alone.extend(t.target.name for t in tables)
        return alone_tables.apply_alone_tables(ctx, tables, *args, **kwargs)

    monkeypatch.setattr(batch, "apply_alone_tables", spied)
    lake.add_pipeline("odd", "debezium-json", keys={"customers": ["id"]})
    lines = [_insert({"id": f"p{n}", "name": "v"}) for n in range(plain)]
    lines.append(_insert({"id": "k1", "name": "v", "a`b": 1}))
    lake.land("odd", "000.json", lines)

    lake.run("odd")

    assert applied_alone == (["customers"] if alone else [])
    rows = {r["id"]: r for r in lake.rows("customers")}
    assert len(rows) == plain + 1
    assert rows["k1"] == {"id": "k1", "name": "v", "a`b": 1}
    assert rows["p0"] == {"id": "p0", "name": "v", "a`b": None}
    assert lake.dead_letters() == []

    lake.land("odd", "001.json", [_insert({"id": "k2", "name": "w", "a`b": 2})])
    lake.run("odd")
    assert {r["id"]: r["a`b"] for r in lake.rows("customers")}["k2"] == 2
