"""Tables with soft or ignored deletes, or computed columns, are classified in groups too
(``WritePolicy.fits_a_group``): a pipeline whose every table keeps its deleted rows,
flagged or not, or computes a column, pays one plan for all of them, not one per table, and each
still flags, moves and revives its rows, counts its ignored deletes or computes its columns, as
``keyed.apply_table`` does.
"""

from __future__ import annotations

from typing import Any

import pytest
from canal_messages import outcomes, row_message
from spark_probes import GROUP_WRITE_PATHS, count_local_checkpoints, use_group_write_path

FLAGGED = ("id", "v", "_cdc_deleted", "_cdc_op", "_cdc_batch_id")


def _flagged(lake: Any, name: str) -> dict[int, tuple[str, bool, str, int]]:
    rows = lake.rows(name, *FLAGGED)
    return {r["id"]: (r["v"], r["_cdc_deleted"], r["_cdc_op"], r["_cdc_batch_id"]) for r in rows}


def _tombstones(lake: Any) -> list[tuple[str, str, int]]:
    rows = lake.table("_cdc_tombstones").collect()
    return sorted((r["target_table"], r["key"], r["batch_id"]) for r in rows)


@pytest.mark.parametrize(("rewritten_rows", "chunk_rows"), GROUP_WRITE_PATHS)
def test_soft_delete_tables_classified_together_flag_move_and_revive_rows(
    lake, rewritten_rows, chunk_rows, monkeypatch
):
    grouped = use_group_write_path(lake, rewritten_rows, chunk_rows)
    lake.add_pipeline("shop", "canal-json", deletes="soft")
    lake.land(
        "shop",
        "001.json",
        [
            row_message("orders", "INSERT", {"id": 1, "v": "a"}, 10),
            row_message("orders", "INSERT", {"id": 2, "v": "b"}, 11),
            row_message("orders", "DELETE", {"id": 9, "v": "z"}, 12),  # never there: a tombstone
            row_message("items", "INSERT", {"id": 1, "v": "x"}, 13),
            row_message("items", "INSERT", {"id": 2, "v": "y"}, 14),
        ],
    )
    checkpoints = count_local_checkpoints(monkeypatch)

    first = lake.run("shop")

    # The two new tables are classified together: one table at a time, each would add its own.
    assert len(checkpoints) == grouped
    assert outcomes(first) == {
        # messages, inserted, updated, deleted, deleted absent, superseded, older, dead letters
        "orders": (3, 2, 0, 0, 1, 0, 0, 0),
        "items": (2, 2, 0, 0, 0, 0, 0, 0),
    }
    # Rows appended through pyiceberg still carry the flag, false (not null).
    assert _flagged(lake, "orders") == {1: ("a", False, "INSERT", 1), 2: ("b", False, "INSERT", 1)}
    assert _flagged(lake, "items") == {1: ("x", False, "INSERT", 1), 2: ("y", False, "INSERT", 1)}

    lake.land(
        "shop",
        "002.json",
        [
            row_message("orders", "DELETE", {"id": 1, "v": "a"}, 20),
            row_message("orders", "UPDATE", {"id": 2, "v": "b2"}, 21),
            row_message("orders", "INSERT", {"id": 9, "v": "late"}, 5),  # older than its tombstone
            row_message("items", "DELETE", {"id": 2, "v": "y"}, 22),
            row_message("items", "INSERT", {"id": 3, "v": "z"}, 23),
            row_message("items", "UPDATE", {"id": 1, "v": "x-old"}, 3),  # older than the row
        ],
    )
    checkpoints.clear()

    second = lake.run("shop")

    assert len(checkpoints) == grouped
    assert outcomes(second) == {
        "orders": (3, 0, 1, 1, 0, 0, 1, 0),
        "items": (3, 1, 0, 1, 0, 0, 1, 0),
    }
    # A deleted row stays with its values, flagged, carrying the delete's operation and batch.
    assert _flagged(lake, "orders") == {
        1: ("a", True, "DELETE", 2),
        2: ("b2", False, "UPDATE", 2),
    }
    assert _flagged(lake, "items") == {
        1: ("x", False, "INSERT", 1),
        2: ("y", True, "DELETE", 2),
        3: ("z", False, "INSERT", 2),
    }

    lake.land(
        "shop",
        "003.json",
        [
            row_message("orders", "INSERT", {"id": 1, "v": "a3"}, 30),  # revives the row
            row_message("orders", "INSERT", {"id": 9, "v": "back"}, 31),  # clears its tombstone
            row_message("items", "DELETE", {"id": 2, "v": "y"}, 32),  # of a soft-deleted row
            row_message("items", "DELETE", {"id": 3, "v": "z"}, 33),
            row_message("items", "INSERT", {"id": 1, "v": "x-old"}, 4),  # older than the row
        ],
    )

    third = lake.run("shop")

    assert outcomes(third) == {
        "orders": (2, 2, 0, 0, 0, 0, 0, 0),
        "items": (3, 0, 0, 1, 1, 0, 1, 0),
    }
    # Revived in place, not appended beside the flagged row.
    assert _flagged(lake, "orders") == {
        1: ("a3", False, "INSERT", 3),
        2: ("b2", False, "UPDATE", 2),
        9: ("back", False, "INSERT", 3),
    }
    # The delete of a soft-deleted row moves its order, operation and batch on; values stay.
    assert _flagged(lake, "items") == {
        1: ("x", False, "INSERT", 1),
        2: ("y", True, "DELETE", 3),
        3: ("z", True, "DELETE", 3),
    }
    assert _tombstones(lake) == [("items", '["2"]', 3), ("items", '["3"]', 3)]
    # A rewrite leaves no delete file; a MERGE of these few rows writes position deletes.
    last = lake.snapshot_files("items")[-1]
    assert last[0] == "overwrite"
    assert (last[3] == "0") == (rewritten_rows is None)


def test_tables_ignoring_deletes_classified_together_count_them_and_keep_rows(lake, monkeypatch):
    lake.add_pipeline("shop", "canal-json", deletes="ignore")
    lake.land(
        "shop",
        "001.json",
        [
            row_message("orders", "INSERT", {"id": 1, "v": "a"}, 10),
            row_message("orders", "INSERT", {"id": 2, "v": "b"}, 11),
            row_message("orders", "DELETE", {"id": 2, "v": "b"}, 12),  # supersedes nothing
            row_message("orders", "DELETE", {"id": 9, "v": "z"}, 13),  # no tombstone either
            row_message("items", "INSERT", {"id": 1, "v": "x"}, 14),
            row_message("stock", "INSERT", {"id": 1, "qty": 5}, 15),
        ],
    )
    checkpoints = count_local_checkpoints(monkeypatch)

    first = lake.run("shop")

    assert len(checkpoints) == 1  # the batch's: the three new tables classified together
    assert outcomes(first) == {
        # messages, inserted, updated, deleted, deleted absent, superseded, older, dead letters
        "orders": (4, 2, 0, 0, 0, 0, 0, 0),
        "items": (1, 1, 0, 0, 0, 0, 0, 0),
        "stock": (1, 1, 0, 0, 0, 0, 0, 0),
    }
    assert {n: t.deletes_ignored for n, t in first.tables.items()} == {
        "orders": 2,
        "items": 0,
        "stock": 0,
    }
    assert lake.rows("orders") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]

    lake.land(
        "shop",
        "002.json",
        [
            row_message("orders", "DELETE", {"id": 1, "v": "a"}, 20),
            row_message("orders", "UPDATE", {"id": 2, "v": "b2"}, 21),
            row_message("stock", "DELETE", {"id": 1, "qty": "lots"}, 22),  # a dead letter
            row_message("stock", "UPDATE", {"id": 1, "qty": 6}, 23),
            row_message("items", "DELETE", {"id": 1, "v": "x"}, 24),
        ],
    )
    checkpoints.clear()

    second = lake.run("shop")

    # The batch's and its dead letters': one table at a time would add one per table.
    assert len(checkpoints) == 2
    assert outcomes(second) == {
        "orders": (2, 0, 1, 0, 0, 0, 0, 0),
        "items": (1, 0, 0, 0, 0, 0, 0, 0),
        "stock": (1, 0, 1, 0, 0, 0, 0, 1),
    }
    assert {n: t.deletes_ignored for n, t in second.tables.items()} == {
        "orders": 1,
        "items": 1,
        "stock": 0,
    }
    assert lake.rows("orders") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b2"}]
    assert lake.rows("items") == [{"id": 1, "v": "x"}]
    assert lake.rows("stock") == [{"id": 1, "qty": 6}]
    [letter] = lake.dead_letters()
    assert (letter["target_table"], letter["line"]) == ("stock", 3)
    assert lake.table("_cdc_tombstones").count() == 0


@pytest.mark.parametrize("rewritten_rows", [None, 0])
def test_tables_computing_columns_classified_together(lake, rewritten_rows, monkeypatch):

    if rewritten_rows is not None:
        lake.route_at(rewritten_rows=rewritten_rows)
    computed = {"*": {"computed_columns": {"shout": "upper(v)", "next_id": "id + 1"}}}
    lake.add_pipeline("shop", "canal-json", table_options=computed)
    lake.land(
        "shop",
        "001.json",
        [
            row_message("orders", "INSERT", {"id": 1, "v": "a"}, 10),
            row_message("orders", "INSERT", {"id": 2, "v": "b"}, 11),
            row_message("items", "INSERT", {"id": 7, "v": "x"}, 12),
        ],
    )
    checkpoints = count_local_checkpoints(monkeypatch)

    lake.run("shop")

    assert len(checkpoints) == 1  # the batch's: both new tables classified together
    assert lake.rows("orders") == [
        {"id": 1, "v": "a", "shout": "A", "next_id": 2},
        {"id": 2, "v": "b", "shout": "B", "next_id": 3},
    ]
    assert lake.rows("items") == [{"id": 7, "v": "x", "shout": "X", "next_id": 8}]

    lake.land(
        "shop",
        "002.json",
        [
            row_message("orders", "UPDATE", {"id": 1, "v": "a2"}, 20),
            row_message("orders", "INSERT", {"id": 3, "v": "c"}, 21),
            row_message("items", "UPDATE", {"id": 7, "v": "y"}, 22),
        ],
    )
    checkpoints.clear()

    second = lake.run("shop")

    assert len(checkpoints) == 1
    assert outcomes(second) == {
        "orders": (2, 1, 1, 0, 0, 0, 0, 0),
        "items": (1, 0, 1, 0, 0, 0, 0, 0),
    }
    assert lake.rows("orders") == [
        {"id": 1, "v": "a2", "shout": "A2", "next_id": 2},
        {"id": 2, "v": "b", "shout": "B", "next_id": 3},
        {"id": 3, "v": "c", "shout": "C", "next_id": 4},
    ]
    assert lake.rows("items") == [{"id": 7, "v": "y", "shout": "Y", "next_id": 8}]
