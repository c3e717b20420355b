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

import uuid
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
    from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntry, ManifestEntryStatus
    from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
    from pyiceberg.table.snapshots import (
        Operation,
        Snapshot,
        SnapshotSummaryCollector,
        Summary,
        update_snapshot_summaries,
    )
    from pyiceberg.table.update import (
        AddSnapshotUpdate,
        AssertRefSnapshotId,
        AssertTableUUID,
        SetSnapshotRefUpdate,
    )

    from cdc_ingest.snapshots.data_files import write_data_files
    from cdc_ingest.snapshots.manifest_writers import (
        avro_compression,
        manifest_list_writer,
        manifest_writer,
    )

    metadata, io = table.metadata, table.io
    parent = table.current_snapshot()
    if parent is None:  # nothing was read: a table without rows is appended to, not rewritten
        raise FilesChanged(f"{table.name()}: it has no snapshot to rewrite")
    schema, spec = metadata.schema(), metadata.spec()
    compression = avro_compression(metadata.properties)
    live = [
        entry
        for manifest in parent.manifests(io)
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True)
    ]
    if {e.data_file.file_path for e in live} != read or any(
        e.data_file.content != DataFileContent.DATA for e in live
    ):
        raise FilesChanged(f"{table.name()}: its files changed since they were read")
    snapshot_id = metadata.new_snapshot_id()
    sequence_number = metadata.next_sequence_number()
    commit = uuid.uuid4()
    locations = table.location_provider()
    added = write_data_files(metadata, locations, io, rows, commit)
    collector = SnapshotSummaryCollector()
    manifests = []
    # Each manifest's entries: (sequence number, file sequence number, data file).
    written: list[tuple[ManifestEntryStatus, list[tuple[int | None, int | None, DataFile]]]] = [
        (ManifestEntryStatus.ADDED, [(None, None, f) for f in added]),
        (
            ManifestEntryStatus.DELETED,
            [(e.sequence_number, e.file_sequence_number, e.data_file) for e in live],
        ),
    ]
    for number, (status, entries) in enumerate(written):
        if not entries:
            continue
        path = locations.new_metadata_location(f"{commit}-m{number}.avro")
        with manifest_writer(
            metadata.format_version, spec, schema, io.new_output(path), snapshot_id, compression
        ) as writer:
            for sequence, file_sequence, data_file in entries:
                writer.add_entry(
                    ManifestEntry.from_args(
                        status=status,
                        snapshot_id=snapshot_id,
                        sequence_number=sequence,
                        file_sequence_number=file_sequence,
                        data_file=data_file,
                    )
                )
                if status == ManifestEntryStatus.ADDED:
                    collector.add_file(data_file, partition_spec=spec, schema=schema)
                else:
                    collector.remove_file(data_file, partition_spec=spec, schema=schema)
        manifests.append(writer.to_manifest_file())
    summary = update_snapshot_summaries(
        Summary(operation=Operation.OVERWRITE, **collector.build(), **properties),
        previous_summary=parent.summary,
    )
    list_path = locations.new_metadata_location(f"snap-{snapshot_id}-0-{commit}.avro")
    with manifest_list_writer(
        metadata.format_version,
        io.new_output(list_path),
        snapshot_id,
        parent.snapshot_id,
        sequence_number,
        compression,
    ) as lists:
        lists.add_manifests(manifests)
    # pyiceberg's models take their fields' names as well as their aliases (as pyiceberg's own
    # calls do), which mypy without pydantic's plugin does not know.
    snapshot = Snapshot(  # type: ignore[call-arg]
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        manifest_list=list_path,
        sequence_number=sequence_number,
        summary=summary,
        schema_id=metadata.current_schema_id,
    )
    updates = (
        AddSnapshotUpdate(snapshot=snapshot),
        SetSnapshotRefUpdate(  # type: ignore[call-arg]
            snapshot_id=snapshot_id, ref_name=MAIN_BRANCH, type=SnapshotRefType.BRANCH
        ),
    )
    requirements = (
        AssertTableUUID(uuid=metadata.table_uuid),
        AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=parent.snapshot_id),  # type: ignore[call-arg]
    )
    return updates, requirements
