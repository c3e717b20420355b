"""Creating, appending to and rewriting small tables through pyiceberg: no JVM round trips, no
Spark job.

A batch that carries a whole database creates hundreds of small tables. Through Spark, each costs
a creation through Iceberg's Java catalog API (dozens of py4j round trips) and an append that
costs a Spark job however small. pyiceberg, over the same catalog (``catalog.properties``),
creates such a table and appends rows already collected as Arrow (``apply/fresh_tables``) for a
small part of that, with the same
snapshot properties as a Spark commit (``apply/commit_notes``); in a JDBC catalog, a group's new
tables are made with their rows in their first metadata version (``snapshots/first_snapshot``) and
registered together. The batch after that rewrites each small table whole (``replace_rows``,
``copy_on_write``; committed together, ``staged_commits``) instead of merging it, and reads the
columns and properties its preparation compares from one load (``table_facts``).

Only what pyiceberg makes exactly as Spark would is done this way: a keyed, unpartitioned,
unsorted table of format version 2 whose columns are all of the types ``iceberg_schema``
converts, in a JDBC or REST catalog. Anything else, or a catalog pyiceberg cannot open here
(its extra not installed), goes through Spark as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from cdc_ingest.snapshots import copy_on_write
from cdc_ingest.snapshots.first_snapshot import register_tables, stage_with_rows
from cdc_ingest.snapshots.iceberg_schema import as_table_rows, iceberg_schema, spark_type_of
from cdc_ingest.snapshots.small_rewrites import SmallTableRewrites
from cdc_ingest.snapshots.staged_commits import StagedRewrites
from cdc_ingest.state.warehouse_errors import warehouse_failures

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import FileScanTask, Table

    from cdc_ingest.catalog.config import CatalogConfig

log = logging.getLogger(__name__)

# Catalogs whose default table location pyiceberg can be told to match: Iceberg's JdbcCatalog puts
# a table at <warehouse>/<namespace>/<table> (pyiceberg's own default adds ".db"); a REST server
# chooses for both.
_KINDS = ("jdbc", "rest")


class ArrowCatalog(SmallTableRewrites):
    """pyiceberg's view of the batch's catalog, opened at its first use (a batch that creates no
    table never opens it); see :func:`arrow_catalog`."""

    def __init__(self, config: CatalogConfig) -> None:
        self.config = config
        self._catalog: Catalog | None = None
        self.available = writes_catalog(config)
        # Tables this object created, as created: their first append needs no load.
        self._created: dict[tuple[str, str], Table] = {}
        # Tables ``table_facts`` loaded: the classification's read of their keys and orders
        # (``read_columns``) starts from that load instead of loading them again.
        self._loaded: dict[tuple[str, str], Table] = {}
        # Tables ``read_columns`` read, as loaded, with the snapshot and the data files it read:
        # their rewrite (``replace_rows``) at that snapshot needs no second load and scan
        # planning.
        self._read: dict[tuple[str, str], tuple[Table, int, list[FileScanTask]]] = {}
        # Tables ``create_keyed`` was asked to create later: (schema, location, properties). Each
        # is made by its first append, with its rows (``snapshots/first_snapshot``), or by
        # ``create_pending``; the run does not end with one left (``apply/batch``).
        self._pending: dict[tuple[str, str], tuple[Schema, str, dict[str, str]]] = {}
        # Within ``created_together``: the tables appends made, not yet registered in the catalog
        # (identifier, first metadata file).
        self._staged: list[tuple[tuple[str, str], str]] | None = None
        # Within ``rewritten_together``: the rewrites staged, not yet committed (identifier).
        self._rewrites: StagedRewrites | None = None

    def _opened(self) -> Catalog | None:
        if self._catalog is None and self.available:
            from pyiceberg.exceptions import NotInstalledError

            from cdc_ingest.state.lake import open_catalog

            try:
                self._catalog = open_catalog(self.config)
            except (ImportError, NotInstalledError) as exc:
                log.info("pyiceberg cannot open catalog %s (%s)", self.config.name, exc)
                self.available = False
        return self._catalog

    def _in_use(self) -> Catalog:
        """The catalog, which the read or create that needs it now has opened."""
        catalog = self._opened()
        assert catalog is not None
        return catalog

    def opened(self) -> Catalog | None:
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

    def _opened_if_there(self) -> Catalog | None:
        """``_opened``, or None where the catalog's SQLite database does not exist yet: a first
        run's Spark creates it (pyiceberg never creates a catalog database: ``open_catalog``)."""
        from cdc_ingest.state.lake import CatalogMissing

        try:
            return self._opened()
        except CatalogMissing:
            return None

    def ensure_namespace(self, namespace: str, owner: str) -> bool:
        """Create the namespace if it does not exist yet, with the properties Spark's CREATE
        NAMESPACE gives it (``owner``; and in a SQL catalog Iceberg's JdbcCatalog's marker);
        False, doing nothing, where Spark is to (no pyiceberg catalog). A batch that reads and
        writes only through pyiceberg then never starts Spark's catalog, a good part of a cold
        run's cost.

        Raises:
            WarehouseWriteError: the catalog failed.
        """
        with warehouse_failures(f"pyiceberg creation of namespace {namespace}"):
            catalog = self._opened_if_there()
            if catalog is None:
                return False
            properties = {"owner": owner}
            if self.config.type == "jdbc":
                properties["exists"] = "true"
            try:
                catalog.create_namespace_if_not_exists(namespace, properties)
            except Exception:
                # Two pipelines starting on a new namespace at once: both find it missing, and
                # the second's insert fails on the first's key. It is there, all this asks.
                if not catalog.namespace_exists(namespace):
                    raise
        return True

    def table_names(self, namespace: str) -> set[str] | None:
        """The names of the namespace's tables (none where it does not exist), or None where
        Spark is to list them (no pyiceberg catalog).

        Raises:
            WarehouseWriteError: the catalog failed.
        """
        from pyiceberg.exceptions import NoSuchNamespaceError

        with warehouse_failures(f"pyiceberg listing of namespace {namespace}"):
            catalog = self._opened_if_there()
            if catalog is None:
                return None
            try:
                return {identifier[-1] for identifier in catalog.list_tables(namespace)}
            except NoSuchNamespaceError:
                return set()

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
        written = str(copy_on_write.WRITTEN_FORMAT_VERSION)
        if schema is None or properties.get("format-version", written) != written:
            return None  # a format version whose manifests only Spark writes
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
                register_tables(self._in_use(), staged)

    def _create_deferred(
        self,
        namespace: str,
        name: str,
        rows: pa.Table | list[dict[str, Any]] | None,
        properties: dict[str, str],
    ) -> None:
        import pyarrow as pa
        from pyiceberg.catalog import MetastoreCatalog

        schema, location, stored = self._pending.pop((namespace, name))
        with warehouse_failures(f"pyiceberg create of {namespace}.{name}"):
            if isinstance(rows, list):
                rows = pa.Table.from_pylist(rows, schema=schema.as_arrow())
            elif rows is not None:
                rows = as_table_rows(rows, schema)
            # Tables wait to be created only where this object chooses their location: a SQL
            # catalog, which pyiceberg keeps as a metastore of its own.
            catalog = self._in_use()
            assert isinstance(catalog, MetastoreCatalog)
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


def writes_catalog(config: CatalogConfig) -> bool:
    """Whether pyiceberg writes tables of this kind of catalog as Spark does."""
    return config.type in _KINDS


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
