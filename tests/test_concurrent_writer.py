"""A mirror another writer commits to while a batch is applied keeps the newer change.

The batch classifies its changes against the table, then merges them. When the table has not
moved in between, the MERGE does not compare orders again (that comparison reads the
``_cdc_order`` of every row); when another writer committed in between, it must.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from canal_messages import canal_message
from conftest import Lake


def test_a_row_another_writer_changed_after_the_classification_is_not_overwritten(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdc_ingest.apply import keyed

    lake.route_at(rewritten_rows=1)  # merged alone, not rewritten
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1)])
    lake.land("shop", "001b.json", [canal_message("orders", "INSERT", {"id": 2, "v": "x"}, 2)])
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            canal_message("orders", "UPDATE", {"id": 1, "v": "b"}, 5),
            canal_message("orders", "UPDATE", {"id": 2, "v": "y"}, 6),
        ],
    )
    wrote = _another_writer_commits_after_classifying(lake, monkeypatch, keyed)
    lake.run("shop")

    assert wrote == [True]
    # The batch's update of key 1 was classified against the older row, yet the newer row
    # stays; key 2, which nobody else changed, takes the batch's update.
    assert lake.rows("orders") == [{"id": 1, "v": "other"}, {"id": 2, "v": "y"}]


@pytest.mark.parametrize("path", ["one table", "a group"])
def test_inserts_after_another_writers_commit_are_merged_not_appended(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    from cdc_ingest.apply import groups, keyed

    module: Any = keyed
    counts = "action_counts"
    # The group path needs two tables (a group of one table larger than a rewrite is applied
    # alone).
    items = [canal_message("items", "INSERT", {"id": 1, "v": "i"}, 3)] if path == "a group" else []
    if path == "one table":
        lake.route_at(group_rows=2)  # applied by keyed.apply_table
    else:
        lake.route_at(rewritten_rows=1)  # written, not rewritten
        module, counts = groups, "arrow_action_counts"
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1)])
    lake.land("shop", "001b.json", [canal_message("orders", "INSERT", {"id": 2, "v": "x"}, 2)])
    if items:
        lake.land("shop", "001c.json", items)
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            canal_message("orders", "INSERT", {"id": 3, "v": "c"}, 5),
            canal_message("orders", "INSERT", {"id": 4, "v": "d"}, 6),
            *[canal_message("items", "INSERT", {"id": 2, "v": "j"}, 7) for _ in items],
        ],
    )
    wrote = _another_writer_commits_after_classifying(
        lake, monkeypatch, module, counts, _another_writer_inserts_order_3
    )
    summary = lake.run("shop")

    assert wrote == [True]
    # Classified as inserts of keys the table did not hold; appended, key 3 would be there twice.
    assert summary.tables["orders"].inserted == 2
    assert lake.rows("orders", "id", "v") == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "x"},
        {"id": 3, "v": "other"},
        {"id": 4, "v": "d"},
    ]


def test_a_row_another_writer_changed_is_kept_when_tables_are_classified_together(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdc_ingest.apply import groups

    _two_tables_and_their_updates(lake)
    # A group of few changes is counted in the driver, from the rows its classification collected.
    wrote = _another_writer_commits_after_classifying(
        lake, monkeypatch, groups, "arrow_action_counts"
    )
    lake.run("shop")

    assert wrote == [True]
    assert lake.rows("orders") == [{"id": 1, "v": "other"}, {"id": 2, "v": "y"}]
    assert lake.rows("items") == [{"id": 1, "v": "j"}]


def test_a_commit_while_a_small_table_is_rewritten_sends_it_to_the_guarded_merge(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdc_ingest.snapshots import copy_on_write

    _two_tables_and_their_updates(lake)
    # The other writer commits after the rewrite read the table, before its commit: pyiceberg's
    # validation refuses the overwrite (else the other row would stay beside the batch's).
    overwrite = copy_on_write.overwrite
    wrote: list[bool] = []

    def another_writer_first(table: Any, *args: Any) -> None:
        if table.name()[-1] == "orders" and not wrote:
            _another_writer_updates_order_1(lake)
            wrote.append(True)
        overwrite(table, *args)

    monkeypatch.setattr(copy_on_write, "overwrite", another_writer_first)
    lake.run("shop")

    assert wrote == [True]
    assert lake.rows("orders") == [{"id": 1, "v": "other"}, {"id": 2, "v": "y"}]
    assert lake.rows("items") == [{"id": 1, "v": "j"}]
    # The rewrites were staged to be committed together; refused for the moved table, each is
    # committed alone: items' rewrite stands (one file, no delete file), and orders' changes are
    # merged by Spark after the other writer's commit.
    assert lake.snapshot_files("items")[-1] == ("overwrite", "2", "1", "0")
    assert [s[1] for s in lake.snapshot_files("orders")] == ["1", None, "2"]


def test_a_commit_between_a_tables_preparation_and_its_classification_is_kept(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdc_ingest.snapshots.arrow_catalog import ArrowCatalog

    _two_tables_and_their_updates(lake)
    # The classification reads the table as its preparation loaded it, before this commit: the
    # rewrite's commit must not drop the other writer's newer row.
    read_columns = ArrowCatalog.read_columns
    wrote: list[bool] = []

    def another_writer_first(catalog: ArrowCatalog, identifier: str, *args: Any) -> Any:
        if identifier.endswith("orders`") and not wrote:
            _another_writer_updates_order_1(lake)
            wrote.append(True)
        return read_columns(catalog, identifier, *args)

    monkeypatch.setattr(ArrowCatalog, "read_columns", another_writer_first)
    lake.run("shop")

    assert wrote == [True]
    assert lake.rows("orders") == [{"id": 1, "v": "other"}, {"id": 2, "v": "y"}]
    assert lake.rows("items") == [{"id": 1, "v": "j"}]


def _another_writer_commits_after_classifying(
    lake: Lake,
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    counts: str = "action_counts",
    commit: Callable[[Lake], None] | None = None,
) -> list[bool]:
    """Make ``module``'s classification counts (its function ``counts``), once, be followed by
    another writer's ``commit`` (default: a newer row of ``orders`` key 1); returns a list that
    holds True once it has."""
    counted = getattr(module, counts)
    wrote: list[bool] = []

    def then_another_writer_commits(*args: Any, **kwargs: Any) -> Any:
        counts = counted(*args, **kwargs)
        if not wrote:
            (commit or _another_writer_updates_order_1)(lake)
            wrote.append(True)
        return counts

    monkeypatch.setattr(module, counts, then_another_writer_commits)
    return wrote


def _another_writer_updates_order_1(lake: Lake) -> None:
    # Newer than any change of the batch: its order's first element is the largest bigint.
    lake.spark.sql(
        f"UPDATE {lake.catalog}.ods.orders SET v = 'other', "
        "_cdc_order = X'FFFFFFFFFFFFFFFF' WHERE id = 1"
    )


def _another_writer_inserts_order_3(lake: Lake) -> None:
    # Newer than any change of the batch; the other columns null.
    table = f"{lake.catalog}.ods.orders"
    values = {"id": "3", "v": "'other'", "_cdc_order": "X'FFFFFFFFFFFFFFFF'"}
    row = ", ".join(
        f"CAST({values.get(f.name, 'NULL')} AS {f.dataType.simpleString()})"
        for f in lake.spark.table(table).schema
    )
    lake.spark.sql(f"INSERT INTO {table} SELECT {row}")


def _two_tables_and_their_updates(lake: Lake) -> None:
    """Two tables holding rows, and a landed batch updating both: the batch classifies them in one
    job (existing_tables.py) and rewrites them through pyiceberg (snapshots/copy_on_write.py)."""
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1),
            canal_message("orders", "INSERT", {"id": 2, "v": "x"}, 2),
            canal_message("items", "INSERT", {"id": 1, "v": "i"}, 3),
        ],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            canal_message("orders", "UPDATE", {"id": 1, "v": "b"}, 5),
            canal_message("orders", "UPDATE", {"id": 2, "v": "y"}, 6),
            canal_message("items", "UPDATE", {"id": 1, "v": "j"}, 7),
        ],
    )
