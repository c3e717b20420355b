"""One snapshot written as pyiceberg's snapshot producers write one: its data files, a manifest
per kind of entry, the manifest list, and the updates that add it and point the main branch at
it. ``first_snapshot`` (a new table's first APPEND) and ``overwrite_snapshot`` (a small table's
whole rewrite) are made of it, so that the two write their files the same way."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.avro.codecs import AvroCompressionCodec
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile, ManifestEntryStatus, ManifestFile
    from pyiceberg.table.locations import LocationProvider
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Operation, Snapshot, SnapshotSummaryCollector
    from pyiceberg.table.update import TableUpdate

# A manifest's entries: (sequence number, file sequence number, data file); None for both where
# the entry is added by this snapshot (the commit assigns them).
Entries = list[tuple["int | None", "int | None", "DataFile"]]


@dataclass
class SnapshotFiles:
    """The files of one snapshot of the table whose metadata is ``metadata``, being written."""

    metadata: TableMetadata
    io: FileIO
    locations: LocationProvider
    snapshot_id: int
    sequence_number: int
    compression: AvroCompressionCodec
    collector: SnapshotSummaryCollector
    commit: uuid.UUID = field(default_factory=uuid.uuid4)
    manifests: list[ManifestFile] = field(default_factory=list)

    @classmethod
    def start(
        cls, metadata: TableMetadata, io: FileIO, locations: LocationProvider
    ) -> SnapshotFiles:
        """A new snapshot of the table: its id and sequence number taken from ``metadata``."""
        from pyiceberg.table.snapshots import SnapshotSummaryCollector

        from cdc_ingest.snapshots.manifest_writers import avro_compression

        return cls(
            metadata,
            io,
            locations,
            metadata.new_snapshot_id(),
            metadata.next_sequence_number(),
            avro_compression(metadata.properties),
            SnapshotSummaryCollector(),
        )

    def data_files(self, rows: pa.Table) -> list[DataFile]:
        """``rows`` (in the table's Arrow types) written as the snapshot's data files."""
        from cdc_ingest.snapshots.data_files import write_data_files

        return write_data_files(self.metadata, self.locations, self.io, rows, self.commit)

    def manifest(self, status: ManifestEntryStatus, entries: Entries) -> None:
        """A manifest of ``entries``, all of ``status``, counted in the snapshot's summary."""
        from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus

        from cdc_ingest.snapshots.manifest_writers import manifest_writer

        if not entries:
            return
        schema, spec = self.metadata.schema(), self.metadata.spec()
        name = f"{self.commit}-m{len(self.manifests)}.avro"
        output = self.io.new_output(self.locations.new_metadata_location(name))
        with manifest_writer(
            self.metadata.format_version, spec, schema, output, self.snapshot_id, self.compression
        ) as writer:
            for sequence, file_sequence, data_file in entries:
                writer.add_entry(
                    ManifestEntry.from_args(
                        status=status,
                        snapshot_id=self.snapshot_id,
                        sequence_number=sequence,
                        file_sequence_number=file_sequence,
                        data_file=data_file,
                    )
                )
                if status == ManifestEntryStatus.ADDED:
                    self.collector.add_file(data_file, partition_spec=spec, schema=schema)
                else:
                    self.collector.remove_file(data_file, partition_spec=spec, schema=schema)
        self.manifests.append(writer.to_manifest_file())

    def updates(
        self, operation: Operation, properties: dict[str, str], parent: Snapshot | None
    ) -> tuple[TableUpdate, ...]:
        """Write the manifest list; the updates that add the snapshot (``operation``, carrying
        ``properties``, after ``parent``) and point the main branch at it."""
        from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
        from pyiceberg.table.snapshots import Snapshot, Summary, update_snapshot_summaries
        from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate

        from cdc_ingest.snapshots.manifest_writers import manifest_list_writer

        summary = update_snapshot_summaries(
            Summary(operation=operation, **self.collector.build(), **properties),
            previous_summary=parent.summary if parent is not None else None,
        )
        parent_id = parent.snapshot_id if parent is not None else None
        name = f"snap-{self.snapshot_id}-0-{self.commit}.avro"
        list_path = self.locations.new_metadata_location(name)
        with manifest_list_writer(
            self.metadata.format_version,
            self.io.new_output(list_path),
            self.snapshot_id,
            parent_id,
            self.sequence_number,
            self.compression,
        ) as lists:
            lists.add_manifests(self.manifests)
        # pyiceberg's models take their fields' names as well as their aliases (as pyiceberg's
        # own calls do), which mypy without pydantic's plugin does not know.
        snapshot = Snapshot(  # type: ignore[call-arg]
            snapshot_id=self.snapshot_id,
            parent_snapshot_id=parent_id,
            manifest_list=list_path,
            sequence_number=self.sequence_number,
            summary=summary,
            schema_id=self.metadata.current_schema_id,
        )
        return (
            AddSnapshotUpdate(snapshot=snapshot),
            SetSnapshotRefUpdate(  # type: ignore[call-arg]
                snapshot_id=self.snapshot_id, ref_name=MAIN_BRANCH, type=SnapshotRefType.BRANCH
            ),
        )
