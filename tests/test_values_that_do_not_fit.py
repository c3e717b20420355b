"""A change holding a value its column cannot take is a dead letter and supersedes nothing, on
every path: a table alone or in a group, created by the batch or holding rows already."""

from __future__ import annotations

import pytest
from canal_messages import outcomes, row_message


@pytest.mark.parametrize("held", [False, True], ids=["created", "existing"])
@pytest.mark.parametrize("tables", [("stock",), ("stock", "depot")], ids=["alone", "group"])
def test_a_change_whose_value_does_not_fit_supersedes_nothing(lake, held, tables):
    """A key's newest change holds a value its column cannot take: the key's older change is
    applied, and the dead letter is no message; a key whose only change does not fit is not
    applied. The changes with typing errors go into the collapse (collapse.newest_changes), which
    ranks them last."""
    lake.add_pipeline("shop", "canal-json")
    if held:
        lake.land(
            "shop", "000.json", [row_message(t, "INSERT", {"id": 100, "qty": 1}, 1) for t in tables]
        )
        lake.run("shop")
    lines = []
    for n, table in enumerate(tables):
        lines += [
            row_message(table, "INSERT", {"id": 1, "qty": 5}, 30 + 10 * n),
            row_message(table, "UPDATE", {"id": 1, "qty": "lots"}, 31 + 10 * n),
            row_message(table, "INSERT", {"id": 2, "qty": "many"}, 32 + 10 * n),
        ]
    lake.land("shop", "001.json", lines)

    summary = lake.run("shop")

    # messages, inserted, updated, deleted, deleted absent, superseded, older, dead letters
    assert outcomes(summary) == {t: (1, 1, 0, 0, 0, 0, 0, 2) for t in tables}
    for table in tables:
        held_row = [{"id": 100, "qty": 1}] if held else []
        assert lake.rows(table) == [{"id": 1, "qty": 5}, *held_row]
    letters = sorted((d["target_table"], d["line"], d["reason"]) for d in lake.dead_letters())
    expected = []
    for n, table in enumerate(tables):
        for line, value in ((2 + 3 * n, "lots"), (3 + 3 * n, "many")):
            expected.append((table, line, f"column 'qty': value '{value}' is not a valid bigint"))
    assert letters == sorted(expected)
