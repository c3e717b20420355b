"""A pipeline's rows of an append-only system table, read whole once per process and then only
from the data files each later append added.

Every batch plans from all of its pipeline's ``_cdc_checkpoints`` rows. Each batch appends two
small files to that table, so a full scan opens every file since the last compaction, and a
batch's planning grows with the batches before it. A long-lived process (the warm engine, the status
page, the test suite's session) keeps the rows it read with the snapshot they came from; while the
table's newer snapshots are all appends (what batches do), the rows are those plus the rows of the
files they added. Anything else since (a compaction, a rewrite, expired history, another table under
the same name) reads the table whole again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# Pipelines' row sets kept, least recently used dropped first.
KEPT = 64

_kept: OrderedDict[tuple[str, ...], tuple[int, pa.Table]] = OrderedDict()
_lock = threading.Lock()


def _appended_files(table: Any, since: int) -> list[Any] | None:
    """The data files the snapshots after ``since`` added, if they are all appends on top of it;
    else None."""
    from pyiceberg.manifest import ManifestEntryStatus
    from pyiceberg.table.snapshots import Operation

    chain = []
    snapshot = table.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id != since:
        if snapshot.summary is None or snapshot.summary.operation != Operation.APPEND:
            return None
        chain.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    if snapshot is None:
        return None
    files = []
    for added in reversed(chain):
        for manifest in added.manifests(table.io):
            if manifest.added_snapshot_id != added.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                if entry.status == ManifestEntryStatus.ADDED:
                    files.append(entry.data_file)
    return files


def _rows_of_files(table: Any, files: list[Any], fields: tuple[str, ...], row_filter: str) -> Any:
    from pyiceberg.expressions.parser import parse
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.table import FileScanTask

    tasks = [FileScanTask(data_file) for data_file in files]
    scan = ArrowScan(table.metadata, table.io, table.schema().select(*fields), parse(row_filter))
    return scan.to_table(tasks)


def rows_since(table: Any, fields: tuple[str, ...], row_filter: str) -> list[dict[str, Any]]:
    """The rows of ``table`` (a loaded pyiceberg table) matching ``row_filter``, ``fields`` only:
    the rows kept from an earlier call plus those appended since, or a whole scan."""
    import pyarrow as pa

    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    key = (str(table.metadata.table_uuid), row_filter, *fields)
    with _lock:
        kept = _kept.get(key)
    rows = None
    if kept is not None:
        since, kept_rows = kept
        files = [] if since == snapshot.snapshot_id else _appended_files(table, since)
        if files is not None:
            added = _rows_of_files(table, files, fields, row_filter) if files else None
            try:
                rows = pa.concat_tables([kept_rows, added]) if added is not None else kept_rows
            except pa.ArrowInvalid:  # the fields' types changed since: read it whole
                rows = None
    if rows is None:
        rows = table.scan(row_filter=row_filter, selected_fields=fields).to_arrow()
    with _lock:
        _kept[key] = (snapshot.snapshot_id, rows)
        _kept.move_to_end(key)
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    listed: list[dict[str, Any]] = rows.to_pylist()
    return listed
