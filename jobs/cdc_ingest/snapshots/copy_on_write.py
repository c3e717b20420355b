"""Copy-on-write of a small table through pyiceberg (``ArrowCatalog.replace_rows``): read its
rows, drop the changed keys, write the rest and the new rows as one OVERWRITE snapshot.

A MERGE costs a Spark job, its tasks and Spark's planning of the row-level rewrite, however few
rows change; rewriting a table of a few hundred rows through pyiceberg costs a small part of
that, and leaves no position-delete file for readers to apply and ``maintain`` to compact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cdc_ingest.catalog_commits import committed

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.io import FileIO
    from pyiceberg.schema import Schema
    from pyiceberg.table import FileScanTask, Table, Transaction
    from pyiceberg.table.snapshots import Snapshot
    from pyiceberg.table.update import TableRequirement, TableUpdate
    from pyiceberg.table.update.snapshot import _MergeAppendFiles

    Commit = Callable[[Table, tuple[TableUpdate, ...], tuple[TableRequirement, ...]], None]


def transaction_of(table: Table) -> Transaction:
    """A pyiceberg transaction on ``table`` that computes its pending metadata once per change,
    and whose appends merge manifests as Iceberg's Java appends do.

    pyiceberg's ``Transaction.table_metadata`` applies every staged update to the table's
    metadata and deep-copies the result on each read, and an append reads it many times, a large
    part of a small table's append. Its result depends only on the
    table's metadata and the staged updates, both replaced (never changed in place) when they
    change, and its readers only read it.
    """
    global _REUSING_TRANSACTION
    if _REUSING_TRANSACTION is None:
        from pyiceberg.table import Transaction

        class ReusingTransaction(Transaction):
            _computed: tuple[Any, Any, Any] | None = None

            @property
            def table_metadata(self) -> Any:
                done = self._computed
                if done and done[0] is self._table.metadata and done[1] is self._updates:
                    return done[2]
                metadata = super().table_metadata
                self._computed = (self._table.metadata, self._updates, metadata)
                return metadata

            def _append_snapshot_producer(
                self, snapshot_properties: dict[str, str], branch: str | None = "main"
            ) -> Any:
                return _merge_append_of(self, self._table.io, snapshot_properties, branch)

            def commit_transaction(self) -> Table:
                table = super().commit_transaction()
                committed("pyiceberg commit")
                return table

        _REUSING_TRANSACTION = ReusingTransaction
    return _REUSING_TRANSACTION(table)


_REUSING_TRANSACTION: type[Transaction] | None = None


def _merge_append_of(
    transaction: Transaction, io: FileIO, properties: dict[str, str], branch: str | None
) -> _MergeAppendFiles:
    """pyiceberg's merging APPEND producer, merging the table's manifests once they are as many
    as ``commit.manifest.min-count-to-merge`` (100) unless ``commit.manifest-merge.enabled`` is
    false: Iceberg's Java defaults, where pyiceberg's is not to merge. A system table appended
    every batch gained a manifest a batch until ``maintain`` compacted it, each one read by every
    batch's bookkeeping."""
    global _MERGE_APPEND_FILES
    if _MERGE_APPEND_FILES is None:
        from pyiceberg.table import TableProperties
        from pyiceberg.table.update.snapshot import _MergeAppendFiles
        from pyiceberg.utils.properties import property_as_bool

        class MergeAppendFiles(_MergeAppendFiles):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self._merge_enabled = property_as_bool(
                    self._transaction.table_metadata.properties,
                    TableProperties.MANIFEST_MERGE_ENABLED,
                    True,
                )

        _MERGE_APPEND_FILES = MergeAppendFiles
    from pyiceberg.table.snapshots import Operation

    return _MERGE_APPEND_FILES(
        operation=Operation.APPEND,
        transaction=transaction,
        io=io,
        branch=branch,
        snapshot_properties=properties,
    )


_MERGE_APPEND_FILES: type[_MergeAppendFiles] | None = None


def rows_of(
    table: Table,
    tasks: list[FileScanTask],
    schema: Schema,
    row_filter: BooleanExpression | None = None,
) -> pa.Table:
    """The rows of ``tasks`` (a snapshot's planned data files) as Arrow, in ``schema`` (the
    table's, or a projection of it), those matching ``row_filter`` (a pyiceberg expression)."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    scan = ArrowScan(table.metadata, table.io, schema, row_filter or AlwaysTrue())
    return scan.to_table(tasks)


def rewritten(
    rows: pa.Table,
    keys: tuple[str, ...],
    removed: pa.Table,
    added: pa.Table,
    marks: pa.Table | None,
    schema: Any,
) -> pa.Table:
    """A table's rows after a rewrite, in its ``schema``: ``rows`` without those whose ``keys``
    are in ``removed``, plus ``added``, plus the rows of ``marks``' keys with ``marks``' other
    columns (``marked_rows``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from cdc_ingest.snapshots.iceberg_schema import as_table_rows

    parts = [rows.filter(pc.invert(key_in(rows, removed, keys))), added]
    if marks is not None and marks.num_rows:
        parts.append(marked_rows(rows, marks, keys))
    return pa.concat_tables([as_table_rows(part, schema) for part in parts])


def key_in(rows: pa.Table, removed: pa.Table, keys: tuple[str, ...]) -> pa.ChunkedArray:
    """Whether each row's key is one of ``removed``'s (same column types as ``rows``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = removed.select(list(keys)).cast(rows.select(list(keys)).schema)
    if len(keys) == 1:
        return pc.is_in(rows.column(keys[0]), value_set=wanted.column(keys[0]).combine_chunks())
    # A join on the key columns alone (Arrow joins carry no list column, which a row may have).
    numbered = rows.select(list(keys)).append_column("_row", pa.array(range(rows.num_rows)))
    hits = numbered.join(wanted, list(keys), join_type="left semi").column("_row")
    return pc.is_in(numbered.column("_row"), value_set=hits.combine_chunks())


def marked_rows(rows: pa.Table, marks: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """The rows whose key is one of ``marks``', each with the values of ``marks``' other columns
    for its key instead of its own: a soft delete keeps the row's values and moves its marks."""
    import pyarrow as pa

    wanted = marks.select(list(keys)).cast(rows.select(list(keys)).schema)
    others = [c for c in marks.column_names if c not in keys]
    for column in others:
        wanted = wanted.append_column(column, marks.column(column))
    # Joined on the key columns and a row number (Arrow joins carry no list column, which a row
    # may have), then the rows taken by number.
    numbered = rows.select(list(keys)).append_column("_row", pa.array(range(rows.num_rows)))
    hits = numbered.join(wanted, list(keys), join_type="inner")
    marked = rows.take(hits.column("_row"))
    for column in others:
        values = hits.column(column)
        at = marked.schema.get_field_index(column)
        if at < 0:
            marked = marked.append_column(column, values)
        else:
            marked = marked.set_column(at, column, values.cast(marked.schema.field(at).type))
    return marked


def overwrite(
    table: Table,
    tasks: list[FileScanTask],
    rows: pa.Table,
    properties: dict[str, str],
    commit: Commit | None = None,
) -> None:
    """One OVERWRITE snapshot (``overwrite_snapshot``): ``tasks``' data files, every live file of
    the table's current snapshot, out, ``rows`` in, committed by ``commit(table, updates,
    requirements)`` (``staged_commits``) or else by the catalog at once.

    The snapshot lists two manifests, its added files' and the record of the files it replaced:
    pyiceberg 0.12's overwrite also carried every earlier rewrite's record along, so a small table
    rewritten each batch gained a manifest a batch, which every read of it opened and no
    ``maintain`` step removed, so each rewrite cost more than the one before.

    Raises:
        FilesChanged: the table's files are not those of ``tasks`` any more.
        CommitFailedException: another writer committed to the table since it was loaded.
    """
    from cdc_ingest.snapshots.overwrite_snapshot import overwrite_updates

    read = {task.file.file_path for task in tasks}
    updates, requirements = overwrite_updates(table, read, rows, properties)
    if commit is None:
        table._do_commit(updates=updates, requirements=requirements)
        committed("pyiceberg commit")
    else:
        commit(table, updates, requirements)


# The one format version whose manifests this package writes (pyiceberg's writers stop at 2).
WRITTEN_FORMAT_VERSION = 2


def writes_as_spark(table: Table) -> bool:
    """Whether pyiceberg writes the table as Spark would: format version 2, unpartitioned,
    unsorted."""
    return bool(
        table.format_version == WRITTEN_FORMAT_VERSION
        and table.spec().is_unpartitioned()
        and table.sort_order().is_unsorted
    )


def rewritable(table: Table, snapshot: Snapshot, max_rows: int) -> bool:
    """Whether a copy-on-write may replace the table's files: written as Spark would write it,
    at most ``max_rows`` rows, no delete files (pyiceberg would leave them dangling)."""
    totals: Mapping[str, str] = snapshot.summary or {}
    return (
        writes_as_spark(table)
        and totals.get("total-delete-files") == "0"
        and int(totals.get("total-records") or max_rows + 1) <= max_rows
    )
