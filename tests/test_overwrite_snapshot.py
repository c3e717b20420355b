"""A small table's rewrite as one OVERWRITE snapshot made by ``snapshots/overwrite_snapshot.py``:
what Iceberg's spec says such a snapshot holds, checked on a real pyiceberg table (no Spark; the
rewrites through the job are read back by Spark in test_existing_tables.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from cdc_ingest.snapshots import copy_on_write
from cdc_ingest.snapshots.overwrite_snapshot import FilesChanged
from pyiceberg_tables import orders_rows, orders_table


@pytest.fixture
def table(tmp_path: Path) -> Any:
    """A table of two data files (two appends: rows 1-3, then 4-5)."""
    created = orders_table(tmp_path, "rewrites", "v")
    created.append(rows(1, 2, 3))
    created.append(rows(4, 5))
    return created


def rows(*ids: int, tag: str = "a") -> pa.Table:
    return orders_rows("v", tag, ids)


def _tasks(table: Any) -> list[Any]:
    return list(table.scan().plan_files())


def test_a_rewrite_replaces_every_file_in_one_snapshot_as_the_spec_records_it(table: Any) -> None:
    from pyiceberg.manifest import ManifestEntryStatus

    parent = table.current_snapshot()
    copy_on_write.overwrite(table, _tasks(table), rows(1, 6, tag="b"), {"cdc.batch-id": "3"})

    snapshot = table.current_snapshot()
    assert snapshot.parent_snapshot_id == parent.snapshot_id
    assert snapshot.sequence_number == 3
    summary = snapshot.summary
    assert summary.operation.value == "overwrite"
    assert {k: summary[k] for k in ("cdc.batch-id", "added-data-files", "deleted-data-files")} == {
        "cdc.batch-id": "3",
        "added-data-files": "1",
        "deleted-data-files": "2",
    }
    assert {k: summary[k] for k in ("added-records", "deleted-records", "total-records")} == {
        "added-records": "2",
        "deleted-records": "5",
        "total-records": "2",
    }
    assert (summary["total-data-files"], summary["total-delete-files"]) == ("1", "0")
    # One manifest of the added file, one recording the two files replaced, each deleted entry
    # with the sequence numbers of the append that added it and this snapshot's id.
    manifests = snapshot.manifests(table.io)
    counts = [
        (m.added_files_count, m.existing_files_count, m.deleted_files_count) for m in manifests
    ]
    assert counts == [(1, 0, 0), (0, 0, 2)]
    deleted = manifests[1].fetch_manifest_entry(table.io, discard_deleted=False)
    assert sorted((e.sequence_number, e.file_sequence_number) for e in deleted) == [(1, 1), (2, 2)]
    assert {e.status for e in deleted} == {ManifestEntryStatus.DELETED}
    assert {e.snapshot_id for e in deleted} == {snapshot.snapshot_id}
    read = table.scan().to_arrow().sort_by("id")
    assert read.to_pylist() == [{"id": 1, "v": "b1"}, {"id": 6, "v": "b6"}]


def test_a_rewrite_of_files_that_changed_since_they_were_read_is_refused(table: Any) -> None:
    read = _tasks(table)
    table.append(rows(7))

    with pytest.raises(FilesChanged):
        copy_on_write.overwrite(table, read, rows(1, tag="b"), {})
    assert table.scan().to_arrow().num_rows == 6


def test_a_rewrite_after_another_writers_commit_is_refused_by_the_catalog(table: Any) -> None:
    from pyiceberg.exceptions import CommitFailedException

    stale = table.catalog.load_table(("shop", "orders"))
    table.append(rows(7))

    with pytest.raises(CommitFailedException):
        copy_on_write.overwrite(stale, _tasks(stale), rows(1, tag="b"), {})
    assert sorted(table.refresh().scan().to_arrow().column("id").to_pylist()) == [
        1,
        2,
        3,
        4,
        5,
        7,
    ]
