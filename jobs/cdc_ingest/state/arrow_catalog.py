"""Creating and appending to small tables through pyiceberg: no JVM round trips, no Spark job.

A batch that carries a whole database creates hundreds of small tables. Through Spark, each costs
a creation through Iceberg's Java catalog API (about 40 py4j round trips, 31 ms CPU) and an append
of a few hundred rows that costs 0.1 to 0.2 CPU-s however small (a job and its tasks, then the
commit's planning). pyiceberg, over the same catalog (``catalog.properties``), creates such a
table in about 5 ms and appends rows already collected as Arrow (``apply/fresh_tables``) in about
20 (measured on 25 November 2026, 2 cores, a SQLite catalog), with the same snapshot properties
as a Spark commit (``apply/commit_notes``). In a JDBC catalog a table the batch creates for a
group of new tables is made by its append instead (``create_keyed``'s ``deferred``), its rows'
snapshot in its first metadata version (``state/first_snapshot``): a third less CPU.

The batch after that changes rows of those small tables: each is rewritten whole
(``replace_rows``, ``copy_on_write``) instead of merged, and the columns and properties its
preparation compares are read from one pyiceberg load (``table_facts``) instead of two Spark calls.

Only what pyiceberg makes exactly as Spark would is done this way: a keyed, unpartitioned,
unsorted table of format version 2 whose columns are all of the types ``iceberg_schema``
converts, in a JDBC or REST catalog. Anything else, or a catalog pyiceberg cannot open here
(its extra not installed), goes through Spark as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from cdc_ingest.state import copy_on_write
from cdc_ingest.state.first_snapshot import register_tables, stage_with_rows
from cdc_ingest.state.iceberg_schema import as_table_rows, iceberg_schema, spark_type_of
from cdc_ingest.state.staged_commits import StagedCommit, can_stage, commit_staged, stage_commit
from cdc_ingest.state.warehouse_errors import warehouse_failures

if TYPE_CHECKING:
    import pyarrow as pa

    from cdc_ingest.catalog.config import CatalogConfig

log = logging.getLogger(__name__)

# Catalogs whose default table location pyiceberg can be told to match: Iceberg's JdbcCatalog puts
# a table at <warehouse>/<namespace>/<table> (pyiceberg's own default adds ".db"); a REST server
# chooses for both.
_KINDS = ("jdbc", "rest")


class ArrowCatalog:
    """pyiceberg's view of the batch's catalog, opened at its first use (a batch that creates no
    table never opens it); see :func:`arrow_catalog`."""

    def __init__(self, config: CatalogConfig) -> None:
        self.config = config
        self._catalog: Any = None
        self.available = config.type in _KINDS
        # Tables this object created, as created: their first append needs no load (4 of the
        # 20 ms of an append of a few hundred rows).
        self._created: dict[tuple[str, str], Any] = {}
        # Tables ``table_facts`` loaded: the classification's read of their keys and orders
        # (``read_columns``) starts from that load instead of loading them again.
        self._loaded: dict[tuple[str, str], Any] = {}
        # Tables ``read_columns`` read, as loaded, with the snapshot and the data files it read:
        # their rewrite (``replace_rows``) at that snapshot needs no second load and scan planning
        # (about a third of a small table's rewrite).
        self._read: dict[tuple[str, str], tuple[Any, int, list[Any]]] = {}
        # Tables ``create_keyed`` was asked to create later: (schema, location, properties). Each
        # is made by its first append, with its rows (``state/first_snapshot``), or by
        # ``create_pending``; the run does not end with one left (``apply/batch``).
        self._pending: dict[tuple[str, str], tuple[Any, str, dict[str, str]]] = {}
        # Within ``created_together``: the tables appends made, not yet registered in the catalog
        # (identifier, first metadata file).
        self._staged: list[tuple[tuple[str, str], str]] | None = None
        # Within ``rewritten_together``: the rewrites staged, not yet committed (identifier).
        self._rewrites: list[tuple[str, StagedCommit]] | None = None

    def _opened(self) -> Any:
        if self._catalog is None and self.available:
            from pyiceberg.exceptions import NotInstalledError

            from cdc_ingest.state.lake import open_catalog

            try:
                self._catalog = open_catalog(self.config)
            except (ImportError, NotInstalledError) as exc:
                log.info("pyiceberg cannot open catalog %s (%s)", self.config.name, exc)
                self.available = False
        return self._catalog

    def opened(self) -> Any:
        """The pyiceberg catalog (opened now if it was not), or None where this module leaves
        the work to Spark."""
        return self._opened()

    def close(self) -> None:
        engine = getattr(self._catalog, "engine", None)  # a SQL catalog's connection pool
        if engine is not None:
            engine.dispose()
        self._catalog = None
        self._created.clear()
        self._loaded.clear()
        self._read.clear()
        self._pending.clear()  # a failed run's: its rerun creates them
        self._staged = None

    def create_keyed(
        self,
        identifier: str,
        columns: dict[str, str],
        keys: tuple[str, ...],
        properties: dict[str, str],
        deferred: bool = False,
    ) -> bool | None:
        """Create an unpartitioned table of ``columns`` (name -> Spark SQL type) with ``keys`` (if
        any: the system tables have none) as its required identifier fields and ``properties``:
        True if created, False if it exists already, None (nothing done) when this module leaves
        it to Spark.

        ``deferred`` (in a JDBC catalog, where this module chooses the location): the table is
        made by its first ``append``, in the same metadata version as its rows, or by
        ``create_pending``, and True is returned meanwhile; another writer creating the table
        first then fails that call (a catalog failure: the rerun finds the table).

        Raises:
            WarehouseWriteError: the catalog or the warehouse failed.
        """
        from pyiceberg.exceptions import TableAlreadyExistsError

        schema = iceberg_schema(columns, keys)
        if schema is None:
            return None
        _, namespace, name = _parts(identifier)
        with warehouse_failures(f"pyiceberg create of {namespace}.{name}"):
            catalog = self._opened()
            if catalog is None:
                return None
            location = None
            if self.config.type == "jdbc":
                location = f"{self.config.warehouse.rstrip('/')}/{namespace}/{name}"
            # Iceberg's Java catalog stores its default codec on every table it creates.
            stored = {"write.parquet.compression-codec": "zstd", **properties}
            if deferred and location is not None:
                self._pending[(namespace, name)] = (schema, location, stored)
                return True
            try:
                created = catalog.create_table(
                    (namespace, name), schema, location, properties=stored
                )
            except TableAlreadyExistsError:
                return False
        self._created[(namespace, name)] = created
        return True

    def create_pending(self, identifier: str | None = None) -> None:
        """Create the deferred table ``identifier`` (if it is one; all of them without it) with
        no rows.

        Raises:
            WarehouseWriteError: the catalog or the warehouse failed, or another writer created
                the table first.
        """
        wanted = [tuple(_parts(identifier)[1:])] if identifier else list(self._pending)
        for namespace, name in wanted:
            if (namespace, name) in self._pending:
                self._create_deferred(namespace, name, None, {})

    @contextmanager
    def created_together(self) -> Iterator[None]:
        """The deferred tables that appends in the block create are registered in the catalog
        together when it ends (``first_snapshot.register_tables``: one transaction in a SQL
        catalog); until then no reader of the catalog sees them. A block that raises registers
        none: their files are left unreferenced, as after a failed commit, and the rerun creates
        them.

        Raises:
            WarehouseWriteError: the catalog or the warehouse failed, or another writer created
                one of the tables first.
        """
        self._staged = []
        try:
            yield
            staged = self._staged
        finally:
            self._staged = None
        if staged:
            names = ", ".join(f"{namespace}.{name}" for (namespace, name), _ in staged[:3])
            more = f" and {len(staged) - 3} more" if len(staged) > 3 else ""
            with warehouse_failures(f"pyiceberg create of {names}{more}"):
                register_tables(self._opened(), staged)

    @contextmanager
    def rewritten_together(self) -> Iterator[set[str]]:
        """The rewrites ``replace_rows`` makes in the block are committed together when it ends
        (``staged_commits``: one transaction in a SQL catalog); the set yielded then holds the
        identifiers of those another writer's commit left out, whose changes the caller merges
        by Spark instead. A block that raises commits none.

        Raises:
            WarehouseWriteError: the catalog failed.
        """
        moved: set[str] = set()
        self._rewrites = []
        try:
            yield moved
            staged = self._rewrites
        finally:
            self._rewrites = None
        if staged:
            with warehouse_failures(f"pyiceberg commit of {len(staged)} rewritten tables"):
                left = commit_staged(self._opened(), [commit for _, commit in staged])
            moved.update(identifier for identifier, commit in staged if commit in left)
            for commit in left:
                log.info("%s.%s changed meanwhile: merged by Spark", *commit.identifier)

    def _create_deferred(
        self,
        namespace: str,
        name: str,
        rows: pa.Table | list[dict[str, Any]] | None,
        properties: dict[str, str],
    ) -> None:
        import pyarrow as pa

        schema, location, stored = self._pending.pop((namespace, name))
        with warehouse_failures(f"pyiceberg create of {namespace}.{name}"):
            if isinstance(rows, list):
                rows = pa.Table.from_pylist(rows, schema=schema.as_arrow())
            elif rows is not None:
                rows = as_table_rows(rows, schema)
            catalog = self._opened()
            staged = (
                (namespace, name),
                stage_with_rows(
                    catalog, (namespace, name), schema, location, stored, rows, properties
                ),
            )
            if self._staged is None:
                register_tables(catalog, [staged])
            else:
                self._staged.append(staged)

    def append(
        self,
        identifier: str,
        rows: pa.Table | list[dict[str, Any]],
        properties: dict[str, str],
    ) -> bool:
        """Append ``rows`` to the table in one commit carrying ``properties``: Arrow with the
        table's column names, or dicts by column name (a batch's few bookkeeping rows; a column a
        row lacks is null, naive datetimes are UTC). False, writing nothing, when the table is one
        this module leaves to Spark (partitioned, sorted, another format version) or pyiceberg
        cannot open the catalog.

        Raises:
            WarehouseWriteError: the catalog or the warehouse failed.
        """
        import pyarrow as pa

        _, namespace, name = _parts(identifier)
        with warehouse_failures(f"pyiceberg append to {namespace}.{name}"):
            catalog = self._opened()
            if catalog is None:
                return False
            if (namespace, name) in self._pending:
                self._create_deferred(namespace, name, rows, properties)
                return True
            table = self._created.pop((namespace, name), None)
            if table is None:
                table = catalog.load_table((namespace, name))
            if not copy_on_write.writes_as_spark(table):
                return False
            if isinstance(rows, list):
                arrow = pa.Table.from_pylist(rows, schema=table.schema().as_arrow())
            else:
                arrow = as_table_rows(rows, table.schema())
            # pyiceberg retries a commit that lost a race with another writer (a pipeline
            # sharing the namespace's system tables), as Iceberg's Java append does.
            with copy_on_write.transaction_of(table) as transaction:
                transaction.append(arrow, snapshot_properties=properties)
        return True

    def table_facts(self, identifier: str) -> tuple[dict[str, str], dict[str, str]] | None:
        """An existing table's columns (name -> Spark SQL type, as Spark's schema spells them)
        and properties (as ``SHOW TBLPROPERTIES`` lists those a table's design is compared with:
        its own and ``format-version``), from one pyiceberg load instead of two Spark calls
        (a plan and a job each). None, for Spark to read them, where a column's type has no
        Spark name here (nested, fixed, uuid, time) or the table is not there.

        Raises:
            WarehouseWriteError: the catalog or the warehouse failed.
        """
        from pyiceberg.exceptions import NoSuchTableError

        _, namespace, name = _parts(identifier)
        with warehouse_failures(f"pyiceberg load of {namespace}.{name}"):
            catalog = self._opened()
            if catalog is None:
                return None
            try:
                table = catalog.load_table((namespace, name))
            except NoSuchTableError:
                return None
        self._loaded[(namespace, name)] = table
        columns: dict[str, str] = {}
        for field in table.schema().fields:
            spark_type = spark_type_of(field.field_type)
            if spark_type is None:
                return None
            columns[field.name] = spark_type
        properties = dict(table.properties)
        properties["format-version"] = str(table.format_version)
        properties.pop("owner", None)  # reserved by Spark, which leaves it out of the listing
        return columns, properties

    def altered(self, identifier: str) -> None:
        """Drop what this object keeps of a table another API changed (columns, types, design):
        its next read loads it again."""
        _, namespace, name = _parts(identifier)
        self._loaded.pop((namespace, name), None)
        self._read.pop((namespace, name), None)

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
        _, namespace, name = _parts(identifier)
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
            if not set(columns) <= {f.name for f in table.schema().fields}:
                return None  # a mirror altered by hand: Spark's read names what is missing
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
        comparing orders again). A table ``read_columns`` read
        at ``read_at`` is not loaded again: a commit since then fails the overwrite's validation
        as one during the rewrite does.

        Raises:
            WarehouseWriteError: the catalog or the warehouse failed.
        """
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyiceberg.exceptions import CommitFailedException, ValidationException

        _, namespace, name = _parts(identifier)
        with warehouse_failures(f"pyiceberg rewrite of {namespace}.{name}"):
            catalog = self._opened()
            if catalog is None:
                return False
            table, at, tasks = self._read.pop((namespace, name), (None, None, []))
            if table is None or at != read_at:
                table = catalog.load_table((namespace, name))
                tasks = []
            snapshot = table.current_snapshot()
            moved = snapshot is None or snapshot.snapshot_id != read_at
            if moved or not copy_on_write.rewritable(table, snapshot, max_rows):
                return False
            schema = table.schema()
            if any(f.name not in added.column_names for f in schema.fields):
                return False  # a column the changes do not write keeps its values in a MERGE
            tasks = tasks or list(table.scan(snapshot_id=read_at).plan_files())
            rows = copy_on_write.rows_of(table, tasks, schema)
            kept = rows.filter(pc.invert(copy_on_write.key_in(rows, removed, keys)))
            parts = [kept, added]
            if marks is not None and marks.num_rows:
                parts.append(copy_on_write.marked_rows(rows, marks, keys))
            after = pa.concat_tables([as_table_rows(part, schema) for part in parts])
            commit = None
            if self._rewrites is not None and can_stage(catalog):
                commit = partial(self._stage_rewrite, identifier)
            try:
                copy_on_write.overwrite(table, tasks, after, properties, commit)
            except (CommitFailedException, ValidationException) as exc:
                log.info("%s.%s changed meanwhile (%s): merged by Spark", namespace, name, exc)
                return False
        return True

    def _stage_rewrite(self, identifier: str, table: Any, transaction: Any) -> None:
        assert self._rewrites is not None
        self._rewrites.append((identifier, stage_commit(self._catalog, table, transaction)))


def _parts(identifier: str) -> list[str]:
    from cdc_ingest.state.tables import unquoted

    return unquoted(identifier)


@contextmanager
def arrow_catalog(config: CatalogConfig) -> Iterator[ArrowCatalog]:
    """pyiceberg's view of the batch's catalog for the block (opened when first needed)."""
    opened = ArrowCatalog(config)
    try:
        yield opened
    finally:
        opened.close()
