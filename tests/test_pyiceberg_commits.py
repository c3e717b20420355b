"""pyiceberg commits through ``copy_on_write.transaction_of``: the pending metadata is computed
once per change, and a commit that loses a race is retried on the winner's metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from cdc_ingest.snapshots import copy_on_write
from pyiceberg_tables import orders_rows, orders_table


@pytest.fixture
def table(tmp_path: Path) -> Any:
    return orders_table(tmp_path, "commits", "name")


def rows(*ids: int) -> pa.Table:
    return orders_rows("name", "n", ids)


def test_an_append_computes_the_pending_metadata_once_per_change(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyiceberg.table

    computed = [0]
    original = pyiceberg.table.update_table_metadata  # type: ignore[attr-defined]

    def counted(*args: Any, **kwargs: Any) -> Any:
        computed[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(pyiceberg.table, "update_table_metadata", counted)
    with copy_on_write.transaction_of(table) as transaction:
        transaction.append(rows(1, 2), snapshot_properties={"cdc.batch-id": "7"})
    # pyiceberg's own transaction computes (and deep-copies) it on every read: 16 times here.
    assert computed[0] <= 4
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    snapshot = table.current_snapshot()
    assert snapshot.summary["cdc.batch-id"] == "7"
    assert snapshot.summary["added-records"] == "2"


def test_an_append_that_loses_a_race_is_retried_on_the_winners_metadata(table: Any) -> None:
    other = table.catalog.load_table(("shop", "orders"))
    transaction = copy_on_write.transaction_of(table)
    transaction.append(rows(1), snapshot_properties={"cdc.batch-id": "1"})
    # Another writer commits between the staging and the commit.
    other.append(rows(2), snapshot_properties={"cdc.batch-id": "2"})
    transaction.commit_transaction()
    table.refresh()
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2]
    history = [s.summary["cdc.batch-id"] for s in table.snapshots()]
    assert history == ["2", "1"]


def test_appends_merge_the_manifests_once_they_are_as_many_as_the_table_says(table: Any) -> None:
    with table.transaction() as setting:
        setting.set_properties({"commit.manifest.min-count-to-merge": "3"})
    manifests = []
    for key in range(4):
        with copy_on_write.transaction_of(table) as transaction:
            transaction.append(rows(key))
        manifests.append(len(table.current_snapshot().manifests(table.io)))

    # As Iceberg's Java appends: the third append's three manifests become one, the fourth adds
    # one (pyiceberg's fast append keeps one per append: 1, 2, 3, 4).
    assert manifests == [1, 2, 1, 2]
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3]


def test_appends_keep_a_manifest_each_where_the_table_turns_merging_off(table: Any) -> None:
    with table.transaction() as setting:
        setting.set_properties(
            {"commit.manifest.min-count-to-merge": "2", "commit.manifest-merge.enabled": "false"}
        )
    for key in range(3):
        with copy_on_write.transaction_of(table) as transaction:
            transaction.append(rows(key))

    assert len(table.current_snapshot().manifests(table.io)) == 3
