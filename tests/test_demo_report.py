"""The end-of-demo report's pieces: aligned text tables and per-pipeline totals."""

from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO))

from scripts.demo.report import aligned, batch_totals


def test_columns_are_padded_and_numbers_right_aligned() -> None:
    table = aligned(["table", "rows", "note"], [["orders", 3, None], ["a_long_name", 12, "x"]])
    assert table.splitlines() == [
        "  table        rows  note",
        "  -----------  ----  ----",
        "  orders          3  null",
        "  a_long_name    12  x",
    ]


def test_long_values_are_cut_with_an_ellipsis() -> None:
    [_, _, row] = aligned(["v"], [["x" * 30]]).splitlines()
    assert row == "  " + "x" * 21 + "…"


def test_totals_add_every_batch_and_table() -> None:
    summaries = [
        {
            "files": ["a", "b"],
            "lines": 7,
            "dead_lettered": 1,
            "ddl_applied": 1,
            "tables": {"t": {"inserted": 3, "updated": 1}, "u": {"deleted": 2}},
        },
        {"files": ["c"], "lines": 2, "tables": {"t": {"inserted": 1}}},
    ]
    assert batch_totals(summaries) == {
        "files": 3,
        "lines": 9,
        "inserted": 4,
        "updated": 1,
        "deleted": 2,
        "dead_lettered": 1,
        "ddl_applied": 1,
    }
