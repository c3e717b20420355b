"""Reading and rewriting small tables through pyiceberg (copy-on-write), the half of
``ArrowCatalog`` that changes the rows of tables holding some.

A small table's changes are classified against its keys and orders, read here (``read_columns``)
from the load its preparation made (``ArrowCatalog.table_facts``); the table is then rewritten
whole from that read (``replace_rows``, ``copy_on_write``) instead of merged by Spark, and a
group's rewrites are committed together (``rewritten_together``, ``staged_commits``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING

from cdc_ingest.snapshots import copy_on_write
from cdc_ingest.snapshots.overwrite_snapshot import FilesChanged
from cdc_ingest.snapshots.staged_commits import StagedRewrites, can_stage
from cdc_ingest.state.tables import unquoted
from cdc_ingest.state.warehouse_errors import warehouse_failures

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import FileScanTask, Table

log = logging.getLogger(__name__)


class SmallTableRewrites:
    """What ``ArrowCatalog`` reads and rewrites of small tables; its state is ``ArrowCatalog``'s
    (see there)."""

    _loaded: dict[tuple[str, str], Table]
    _read: dict[tuple[str, str], tuple[Table, int, list[FileScanTask]]]
    _rewrites: StagedRewrites | None

    def _opened(self) -> Catalog | None:
        raise NotImplementedError

    @contextmanager
    def rewritten_together(self) -> Iterator[set[str]]:
        """The rewrites ``replace_rows`` makes in the block are committed together when it ends
        (``staged_commits``: one transaction in a SQL catalog); the set yielded then holds the
        identifiers of those another writer's commit left out, whose changes the caller merges
        by Spark instead. A block that raises commits none.

        Raises:
            WarehouseWriteError: the catalog failed.
        """
        rewrites = self._rewrites = StagedRewrites()
        try:
            yield rewrites.moved
        finally:
            self._rewrites = None
        if rewrites.staged:
            with warehouse_failures(f"pyiceberg commit of {len(rewrites.staged)} rewrites"):
                catalog = self._opened()
                assert can_stage(catalog)  # rewrites are staged only where they can be
                rewrites.commit(catalog)

    def rewritable(self, identifier: str, max_rows: int) -> bool:
        """Whether ``read_columns`` would read the table for a rewrite (at most ``max_rows``
        rows, no delete files, written as Spark would write it), from the load its preparation
        made (``table_facts``) or one kept for that read.

        Raises:
            WarehouseWriteError: the catalog or the warehouse failed.
        """
        _, namespace, name = unquoted(identifier)
        with warehouse_failures(f"pyiceberg load of {namespace}.{name}"):
            catalog = self._opened()
            if catalog is None:
                return False
            table = self._loaded.get((namespace, name))
            if table is None:
                table = self._loaded[(namespace, name)] = catalog.load_table((namespace, name))
            snapshot = table.current_snapshot()
            return snapshot is not None and copy_on_write.rewritable(table, snapshot, max_rows)

    def read_columns(
        self, identifier: str, columns: list[str], max_rows: int
    ) -> tuple[int, pa.Table] | None:
        """A small table's current snapshot id and its ``columns`` at that snapshot, read by
        pyiceberg: what ``replace_rows`` could rewrite (see there), else None (Spark reads it).
        A table ``table_facts`` loaded is read as of that load: a commit by another writer since
        then makes its rewrite fail the overwrite's validation (and its MERGE compare orders
        again), as one after this read does.

        Raises:
            WarehouseWriteError: the catalog or the warehouse failed.
        """
        _, namespace, name = unquoted(identifier)
        with warehouse_failures(f"pyiceberg read of {namespace}.{name}"):
            catalog = self._opened()
            if catalog is None:
                return None
            table = self._loaded.pop((namespace, name), None)
            if table is None:
                table = catalog.load_table((namespace, name))
            snapshot = table.current_snapshot()
            if snapshot is None or not copy_on_write.rewritable(table, snapshot, max_rows):
                return None
            # A column dropped by hand is missing from the current schema, and Spark's read
            # names it; the scan reads the snapshot's schema, where a column added since (by
            # hand, or for ``deletes: soft`` turned on) is missing until the next write.
            held = snapshot.schema_id
            schema = table.schema() if held is None else table.schemas().get(held, table.schema())
            readable = {f.name for f in schema.fields} & {f.name for f in table.schema().fields}
            if not set(columns) <= readable:
                return None
            scan = table.scan(snapshot_id=snapshot.snapshot_id, selected_fields=tuple(columns))
            tasks = list(scan.plan_files())
            rows = copy_on_write.rows_of(table, tasks, scan.projection())
            self._read[(namespace, name)] = (table, snapshot.snapshot_id, tasks)
            return snapshot.snapshot_id, rows

    def replace_rows(
        self,
        identifier: str,
        read_at: int | None,
        keys: tuple[str, ...],
        removed: pa.Table,
        added: pa.Table,
        properties: dict[str, str],
        max_rows: int,
        marks: pa.Table | None = None,
    ) -> bool:
        """Copy-on-write of a small table: its rows as of snapshot ``read_at`` without those whose
        ``keys`` are in ``removed``, plus ``added``, replace all of its data files in one
        overwrite commit carrying ``properties``; the held rows of ``marks``' keys (soft deletes,
        also in ``removed``) come back with ``marks``' other columns (``copy_on_write``). False,
        writing nothing, when the table is left to Spark: not written as Spark would write it,
        moved on since ``read_at``, holding delete files, more than ``max_rows`` rows or a
        column ``added`` lacks; or another writer committed a change to its data meanwhile
        (pyiceberg's validation of the overwrite: the caller then merges through Spark,
        comparing orders again). A table ``read_columns`` read at ``read_at`` is not loaded
        again: a commit since then fails the overwrite's validation as one during the rewrite
        does. Within ``rewritten_together``, the commit is staged.

        Raises:
            WarehouseWriteError: the catalog or the warehouse failed.
        """
        from pyiceberg.exceptions import CommitFailedException, ValidationException

        _, namespace, name = unquoted(identifier)
        with warehouse_failures(f"pyiceberg rewrite of {namespace}.{name}"):
            catalog = self._opened()
            if catalog is None:
                return False
            table, at, tasks = self._read.pop((namespace, name), (None, None, []))
            if table is None or at != read_at:
                table = catalog.load_table((namespace, name))
                tasks = []
            snapshot = table.current_snapshot()
            if (
                snapshot is None
                or snapshot.snapshot_id != read_at
                or not copy_on_write.rewritable(table, snapshot, max_rows)
            ):
                return False
            schema = table.schema()
            written = set(added.column_names)
            if any(f.name not in written for f in schema.fields):
                return False  # a column the changes do not write keeps its values in a MERGE
            tasks = tasks or list(table.scan(snapshot_id=read_at).plan_files())
            rows = copy_on_write.rows_of(table, tasks, schema)
            after = copy_on_write.rewritten(rows, keys, removed, added, marks, schema)
            commit = None
            if self._rewrites is not None and can_stage(catalog):
                commit = partial(self._rewrites.stage, catalog, identifier)
            try:
                copy_on_write.overwrite(table, tasks, after, properties, commit)
            except (CommitFailedException, ValidationException, FilesChanged) as exc:
                log.info("%s.%s changed meanwhile (%s): merged by Spark", namespace, name, exc)
                return False
        return True
