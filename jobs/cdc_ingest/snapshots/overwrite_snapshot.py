"""A small table's rewrite as one OVERWRITE snapshot, made here: every live data file of the
current snapshot out, the new rows' files in.

pyiceberg's overwrite producer reads the current snapshot's manifests twice (the files it deletes,
then the manifests it keeps), builds the Avro layout of every manifest and manifest list it writes,
and validates the overwrite against concurrent changes: most of a small table's rewrite. A
rewrite replaces every file, so the snapshot
is simple: one manifest of the added files, one recording the deleted ones (with their sequence
numbers, as the spec keeps them), no manifest carried over, written by ``manifest_writers``
(layouts built once), with the summary pyiceberg's producer computes. Its requirement, that the
main branch still points at the snapshot read, stands for the validation: any commit since the
read refuses the rewrite (the caller then merges through Spark, comparing orders again).

Private API: pyiceberg's writing of data files; pyiceberg is pinned 0.12.*, and
tests/test_overwrite_snapshot.py compares these snapshots with pyiceberg's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table
    from pyiceberg.table.update import TableRequirement, TableUpdate


class FilesChanged(Exception):
    """The current snapshot's live files are not those the rewrite read."""


def overwrite_updates(
    table: Table, read: set[str], rows: pa.Table, properties: dict[str, str]
) -> tuple[tuple[TableUpdate, ...], tuple[TableRequirement, ...]]:
    """The updates and requirements of one OVERWRITE snapshot of ``table`` (as loaded) that
    deletes every live data file of its current snapshot, which must be the files at ``read``
    (their paths), and adds ``rows`` (in the table's schema), carrying ``properties``.

    Raises:
        FilesChanged: the current snapshot's live files are not ``read``.
    """
    from pyiceberg.manifest import DataFileContent, ManifestEntryStatus
    from pyiceberg.table.refs import MAIN_BRANCH
    from pyiceberg.table.snapshots import Operation
    from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID

    from cdc_ingest.snapshots.producer import SnapshotFiles

    metadata, io = table.metadata, table.io
    parent = table.current_snapshot()
    if parent is None:  # nothing was read: a table without rows is appended to, not rewritten
        raise FilesChanged(f"{table.name()}: it has no snapshot to rewrite")
    live = [
        entry
        for manifest in parent.manifests(io)
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)
    ]
    if {e.data_file.file_path for e in live} != read or any(
        e.data_file.content != DataFileContent.DATA for e in live
    ):
        raise FilesChanged(f"{table.name()}: its files changed since they were read")
    files = SnapshotFiles.start(metadata, io, table.location_provider())
    added = files.data_files(rows)
    files.manifest(ManifestEntryStatus.ADDED, [(None, None, f) for f in added])
    deleted = [(e.sequence_number, e.file_sequence_number, e.data_file) for e in live]
    files.manifest(ManifestEntryStatus.DELETED, deleted)
    updates = files.updates(Operation.OVERWRITE, properties, parent)
    requirements = (
        AssertTableUUID(uuid=metadata.table_uuid),
        AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=parent.snapshot_id),  # type: ignore[call-arg]
    )
    return updates, requirements
