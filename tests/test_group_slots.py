"""Tables with columns of their own share a group (``apply/group_layout``): a database's tables
share few column names, and each group's rows hold slots that several tables' columns of one type
share, each read per change by its table's name for it. Each table still gets its own columns'
values, its own typing errors (named by its column) and its own updates and deletes.
"""

from __future__ import annotations

from typing import Any

import pytest
from canal_messages import canal_message, outcomes
from spark_probes import GROUP_WRITE_PATHS, count_local_checkpoints, use_group_write_path

ORDERS = {"id": "INT", "amount": "INT", "note": "VARCHAR(10)"}
ITEMS = {"id": "INT", "qty": "INT", "label": "VARCHAR(10)"}


def _order(kind: str, data: dict[str, Any], es: int) -> dict[str, Any]:
    return canal_message("orders", kind, data, es, ORDERS)


def _item(kind: str, data: dict[str, Any], es: int) -> dict[str, Any]:
    return canal_message("items", kind, data, es, ITEMS)


def _rows(lake: Any, name: str, *columns: str) -> dict[int, tuple[Any, ...]]:
    return {r["id"]: tuple(r[c] for c in columns) for r in lake.rows(name, "id", *columns)}


@pytest.mark.parametrize(("rewritten_rows", "chunk_rows"), GROUP_WRITE_PATHS)
def test_tables_of_their_own_columns_are_classified_together(
    lake, rewritten_rows, chunk_rows, monkeypatch
):
    grouped = use_group_write_path(lake, rewritten_rows, chunk_rows)
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            _order("INSERT", {"id": 1, "amount": 10, "note": "a"}, 10),
            _order("INSERT", {"id": 2, "amount": 20, "note": "b"}, 11),
            _item("INSERT", {"id": 1, "qty": 5, "label": "x"}, 12),
            _item("INSERT", {"id": 2, "qty": "lots", "label": "y"}, 13),
        ],
    )
    checkpoints = count_local_checkpoints(monkeypatch)

    first = lake.run("shop")

    assert len(checkpoints) == grouped + 1  # and the dead letters'
    assert outcomes(first) == {
        # messages applied, inserted, updated, deleted, deleted absent, superseded, older, dead
        # letters
        "orders": (2, 2, 0, 0, 0, 0, 0, 0),
        "items": (1, 1, 0, 0, 0, 0, 0, 1),
    }
    assert _rows(lake, "orders", "amount", "note") == {1: (10, "a"), 2: (20, "b")}
    assert _rows(lake, "items", "qty", "label") == {1: (5, "x")}
    [letter] = lake.dead_letters()
    assert letter["target_table"] == "items"
    assert letter["reason"] == "column 'qty': value 'lots' is not a valid bigint"

    lake.land(
        "shop",
        "002.json",
        [
            _order("UPDATE", {"id": 1, "amount": 11, "note": "a2"}, 20),
            _order("DELETE", {"id": 2, "amount": 20, "note": "b"}, 21),
            _item("UPDATE", {"id": 1, "qty": 6, "label": "x2"}, 22),
            _item("INSERT", {"id": 3, "qty": 7, "label": "z"}, 23),
        ],
    )
    checkpoints.clear()

    second = lake.run("shop")

    assert len(checkpoints) == grouped
    assert outcomes(second) == {
        "orders": (2, 0, 1, 1, 0, 0, 0, 0),
        "items": (2, 1, 1, 0, 0, 0, 0, 0),
    }
    assert _rows(lake, "orders", "amount", "note") == {1: (11, "a2")}
    assert _rows(lake, "items", "qty", "label") == {1: (6, "x2"), 3: (7, "z")}


def test_a_column_a_table_lacks_is_not_read_by_another_tables_slot(lake):
    # With schema_changes: ignore, items keeps its columns when a change carries discount, a
    # column of orders only: read by the slot orders keeps discount in, 'lots' would be a typing
    # error of items' change.
    priced = {**ORDERS, "discount": "INT"}
    lake.add_pipeline("shop", "canal-json", schema_changes="ignore")
    lake.land(
        "shop",
        "001.json",
        [
            canal_message(
                "orders", "INSERT", {"id": 1, "amount": 10, "note": "a", "discount": 1}, 10, priced
            ),
            _item("INSERT", {"id": 1, "qty": 5, "label": "x"}, 11),
        ],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            canal_message(
                "orders", "UPDATE", {"id": 1, "amount": 11, "note": "a2", "discount": 2}, 20, priced
            ),
            canal_message(
                "items",
                "INSERT",
                {"id": 2, "qty": 6, "label": "y", "discount": "lots"},
                21,
                {**ITEMS, "discount": "VARCHAR(10)"},
            ),
        ],
    )

    second = lake.run("shop")

    assert outcomes(second) == {
        "orders": (1, 0, 1, 0, 0, 0, 0, 0),
        "items": (1, 1, 0, 0, 0, 0, 0, 0),
    }
    assert second.ignored_values == 1
    assert lake.dead_letters() == []
    assert _rows(lake, "orders", "amount", "discount") == {1: (11, 2)}
    assert _rows(lake, "items", "qty", "label") == {1: (5, "x"), 2: (6, "y")}
