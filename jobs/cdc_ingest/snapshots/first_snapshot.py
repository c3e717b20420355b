"""A table created with its first rows: one metadata file and one catalog insert (one for all
the tables a group of new tables creates).

pyiceberg's create and then append write two metadata files and make two catalog calls, the second
of which loads the table again to check what the first made; with the appended rows' manifests that
is most of what a batch creating hundreds of small tables pays (``apply/fresh_tables``). Written
here as one version, the table's first metadata already holds the snapshot of its rows, and the
catalog registers it in one insert, which fails as a create does when another writer made a table
of that name first, in less time than a create and a first append. The snapshot is the one
pyiceberg's fast append would commit (the same manifest and manifest list writers, summary and
properties), made by pyiceberg's public writers. Private API: the writing of the data files, the
staging of a new table's metadata (``_create_staged_table``, what pyiceberg's own create writes)
and, to register many tables in one transaction, the SQL catalog's table row (``IcebergTables``,
``_create_table_row``); pyiceberg is pinned 0.12.*, and tests/test_fresh_tables.py would catch a
change.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog, MetastoreCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import StagedTable
    from pyiceberg.table.update import TableUpdate


def stage_with_rows(
    catalog: MetastoreCatalog,
    identifier: tuple[str, str],
    schema: Schema,
    location: str | None,
    properties: dict[str, str],
    rows: pa.Table | None,
    snapshot_properties: dict[str, str],
) -> str:
    """Write the first metadata file of the unpartitioned, unsorted table ``identifier`` of
    ``schema`` (pyiceberg's) at ``location`` with ``properties`` and, if there are ``rows`` (in
    the schema's column types), a first APPEND snapshot of them carrying
    ``snapshot_properties``; return its location, for ``register_tables``: until then, no reader
    of the catalog sees the table (and if another writer takes its name first, the files written
    are left unreferenced, as after a failed commit)."""
    from pyiceberg.serializers import ToOutputFile
    from pyiceberg.table.update import update_table_metadata

    staged = catalog._create_staged_table(identifier, schema, location, properties=properties)
    metadata = staged.metadata
    if rows is not None and rows.num_rows:
        metadata = update_table_metadata(
            metadata, _first_snapshot(staged, rows, snapshot_properties)
        )
    ToOutputFile.table_metadata(metadata, staged.io.new_output(staged.metadata_location))
    return str(staged.metadata_location)


def register_tables(catalog: Catalog, staged: list[tuple[tuple[str, str], str]]) -> None:
    """Register tables whose first metadata files are written: (identifier, metadata location).

    In a SQL catalog (pyiceberg's ``SqlCatalog``, the JDBC catalog's tables) all of them in one
    transaction: pyiceberg's ``register_table`` checks the namespace, commits and loads the table
    back, each time, for each table of a batch that creates hundreds. If one name is taken, the
    transaction registers none, and they are registered one by one, so that the error names the
    table (those before it are registered, as when each is registered alone).

    Raises:
        pyiceberg.exceptions.TableAlreadyExistsError: another writer created one of the tables
            first.
    """
    engine = getattr(catalog, "engine", None)
    if len(staged) > 1 and engine is not None and hasattr(catalog, "_create_table_row"):
        from pyiceberg.catalog.sql import IcebergTables
        from sqlalchemy import insert
        from sqlalchemy.exc import IntegrityError
        from sqlalchemy.orm import Session

        rows = [
            catalog._create_table_row(namespace, name, location)
            for (namespace, name), location in staged
        ]
        with Session(engine) as session:
            try:
                session.execute(insert(IcebergTables), rows)
                session.commit()
                return
            except IntegrityError:
                session.rollback()
    for identifier, location in staged:
        catalog.register_table(identifier, location)


def _first_snapshot(
    staged: StagedTable, rows: pa.Table, snapshot_properties: dict[str, str]
) -> tuple[TableUpdate, ...]:
    """The updates adding a first snapshot of ``rows`` to the staged table and pointing the
    main branch at it (as ``_FastAppendFiles._commit`` makes them, without a parent)."""
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus
    from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
    from pyiceberg.table.snapshots import (
        Operation,
        Snapshot,
        SnapshotSummaryCollector,
        Summary,
        update_snapshot_summaries,
    )
    from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate

    from cdc_ingest.snapshots.data_files import write_data_files
    from cdc_ingest.snapshots.manifest_writers import (
        avro_compression,
        manifest_list_writer,
        manifest_writer,
    )

    metadata, io = staged.metadata, staged.io
    schema, spec = metadata.schema(), metadata.spec()
    compression = avro_compression(metadata.properties)
    snapshot_id = metadata.new_snapshot_id()
    sequence_number = metadata.next_sequence_number()
    commit = uuid.uuid4()
    locations = staged.location_provider()
    data_files = write_data_files(metadata, locations, io, rows, commit)
    manifest_path = locations.new_metadata_location(f"{commit}-m0.avro")
    output = io.new_output(manifest_path)
    with manifest_writer(
        metadata.format_version, spec, schema, output, snapshot_id, compression
    ) as writer:
        for data_file in data_files:
            writer.add(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED,
                    snapshot_id=snapshot_id,
                    sequence_number=None,
                    file_sequence_number=None,
                    data_file=data_file,
                )
            )
    manifest = writer.to_manifest_file()
    collector = SnapshotSummaryCollector()
    for data_file in data_files:
        collector.add_file(data_file, partition_spec=spec, schema=schema)
    summary = update_snapshot_summaries(
        Summary(operation=Operation.APPEND, **collector.build(), **snapshot_properties)
    )
    list_path = locations.new_metadata_location(f"snap-{snapshot_id}-0-{commit}.avro")
    with manifest_list_writer(
        metadata.format_version,
        io.new_output(list_path),
        snapshot_id,
        None,
        sequence_number,
        compression,
    ) as manifests:
        manifests.add_manifests([manifest])
    # pyiceberg's models take their fields' names as well as their aliases (as pyiceberg's own
    # calls do), which mypy without pydantic's plugin does not know.
    snapshot = Snapshot(  # type: ignore[call-arg]
        snapshot_id=snapshot_id,
        parent_snapshot_id=None,
        manifest_list=list_path,
        sequence_number=sequence_number,
        summary=summary,
        schema_id=metadata.current_schema_id,
    )
    return (
        AddSnapshotUpdate(snapshot=snapshot),
        SetSnapshotRefUpdate(  # type: ignore[call-arg]
            snapshot_id=snapshot_id,
            ref_name=MAIN_BRANCH,
            type=SnapshotRefType.BRANCH,
        ),
    )
