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

from typing import TYPE_CHECKING

from cdc_ingest.catalog_commits import committed

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
    _register_all(catalog, staged)
    committed("pyiceberg create")


def _register_all(catalog: Catalog, staged: list[tuple[tuple[str, str], str]]) -> None:
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
    from pyiceberg.manifest import ManifestEntryStatus
    from pyiceberg.table.snapshots import Operation

    from cdc_ingest.snapshots.producer import SnapshotFiles

    files = SnapshotFiles.start(staged.metadata, staged.io, staged.location_provider())
    added = files.data_files(rows)
    files.manifest(ManifestEntryStatus.ADDED, [(None, None, f) for f in added])
    return files.updates(Operation.APPEND, snapshot_properties, None)
