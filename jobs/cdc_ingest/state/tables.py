"""Iceberg tables the job owns: mirrored targets and the pipeline's ``_cdc_`` system tables."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from cdc_ingest import spark_jvm, sql_text
from cdc_ingest.catalog_commits import committed, execute
from cdc_ingest.contract import ColumnType

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.writers.protocol import TableWriter

# Row-level changes are written as delete files (merge-on-read): a micro-batch touching a few rows
# must not rewrite whole data files.
TABLE_PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}

# Columns the product adds to every mirrored table.
ORDER_COLUMN = "_cdc_order"
SYSTEM_COLUMNS: dict[str, str] = {
    ORDER_COLUMN: "binary",  # ordering value of the change that wrote the row (see ``ordering``)
    "_cdc_op": "string",  # that change's vendor operation
    "_cdc_batch_id": "bigint",  # the micro-batch that wrote it
}

DEAD_LETTERS = "_cdc_dead_letters"
CHECKPOINTS = "_cdc_checkpoints"
TOMBSTONES = "_cdc_tombstones"
DDL_HISTORY = "_cdc_ddl_history"
BATCHES = "_cdc_batches"

SYSTEM_TABLES: dict[str, str] = {
    DEAD_LETTERS: (
        "pipeline string, batch_id bigint, file string, line bigint, row int, "
        "kafka_topic string, kafka_partition int, kafka_offset bigint, source_table string, "
        "target_table string, "
        "reason string, raw string, recorded_at timestamp"
    ),
    CHECKPOINTS: (
        "pipeline string, batch_id bigint, status string, file string, file_idx int, "
        "size bigint, fingerprint string, duplicate_of string, kafka_topic string, "
        "kafka_partition int, min_offset bigint, max_offset bigint, records bigint, "
        "summary string, recorded_at timestamp"
    ),
    # Keys deleted from a mirrored table, with the ordering value of the delete, so that a late
    # older insert cannot resurrect them.
    TOMBSTONES: f"target_table string, key string, {ORDER_COLUMN} binary, batch_id bigint",
    DDL_HISTORY: (
        "pipeline string, batch_id bigint, file string, line bigint, source_table string, "
        f"target_table string, op string, statement string, event_time timestamp, "
        f"{ORDER_COLUMN} binary, status string, detail string, recorded_at timestamp"
    ),
    # One row per batch (and per partial run): what it read, did and took; see ``batches``.
    BATCHES: (
        "pipeline string, batch_id bigint, partial boolean, only_tables array<string>, "
        "resumed boolean, run_id string, started_at timestamp, finished_at timestamp, "
        "duration_s double, phase_seconds string, files array<string>, duplicate_files int, "
        "kafka_offsets string, lines bigint, records bigint, messages bigint, "
        "dead_lettered bigint, no_row_change bigint, ddl_recorded bigint, inserted bigint, "
        "updated bigint, deleted bigint, table_counts string, freshness_ms bigint, "
        "freshness timestamp, summary string, recorded_at timestamp"
    ),
}


def quote(name: str) -> str:
    """A Spark SQL identifier, backquoted."""
    return sql_text.name(name)


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return sql_text.literal(text)


def qualified(catalog: str, namespace: str, table: str) -> str:
    """``catalog.namespace.table``, each part quoted."""
    return ".".join(quote(p) for p in (catalog, namespace, table))


def _properties(extra: dict[str, str] | None = None) -> str:
    merged = {**TABLE_PROPERTIES, **(extra or {})}
    return ", ".join(f"{sql_string(k)}={sql_string(v)}" for k, v in merged.items())


def ensure_namespace(spark: SparkSession, catalog: str, namespace: str) -> None:
    """Create the namespace if it does not exist yet."""
    from py4j.protocol import Py4JJavaError

    try:
        execute(spark, f"CREATE NAMESPACE IF NOT EXISTS {quote(catalog)}.{quote(namespace)}")
    except Py4JJavaError:
        # Two pipelines starting on a new namespace at once: Iceberg's JDBC catalog checks that
        # it is missing, then inserts its rows, and the second insert fails on the first's key.
        # The namespace is there then, which is all this asks.
        listed = spark.sql(f"SHOW NAMESPACES IN {quote(catalog)}").collect()
        if namespace not in {row[0] for row in listed}:
            raise


def ensure_system_tables(writer: TableWriter, catalog: str, namespace: str) -> set[str]:
    """Create the pipeline's ``_cdc_`` tables that do not exist yet; returns every table's name.

    pyiceberg's writer creates them as Spark's CREATE TABLE makes them: five CREATE TABLE
    statements would be a large part of a small batch's first run.
    """
    writer.ensure_namespace(namespace)
    existing = writer.table_names(namespace)
    for name, columns in SYSTEM_TABLES.items():
        if name not in existing:
            writer.create_system_table(qualified(catalog, namespace, name), columns)
    return existing | set(SYSTEM_TABLES)


def create_system_table(spark: SparkSession, identifier: str, columns: str) -> None:
    """CREATE TABLE IF NOT EXISTS of a ``_cdc_`` table (``columns`` as ``SYSTEM_TABLES``)."""
    execute(
        spark,
        f"CREATE TABLE IF NOT EXISTS {identifier} ({columns}) "
        f"USING iceberg TBLPROPERTIES ({_properties()})",
    )


def column_types(columns: str) -> dict[str, str]:
    """A system table's columns (``SYSTEM_TABLES``: no type holds a comma) by name."""
    return dict(column.strip().split(" ", 1) for column in columns.split(","))


def namespace_tables(spark: SparkSession, catalog: str, namespace: str) -> set[str]:
    """Names of a namespace's tables through Spark; none if it is missing."""
    namespaces = spark.sql(f"SHOW NAMESPACES IN {quote(catalog)}").collect()
    if namespace not in {row[0] for row in namespaces}:
        return set()
    return table_names(spark, catalog, namespace)


def table_names(spark: SparkSession, catalog: str, namespace: str) -> set[str]:
    """Names of the tables in a namespace."""
    rows = spark.sql(f"SHOW TABLES IN {quote(catalog)}.{quote(namespace)}").collect()
    return {row["tableName"] for row in rows}


def table_properties(spark: SparkSession, identifier: str) -> dict[str, str]:
    """An existing table's properties."""
    rows = spark.sql(f"SHOW TBLPROPERTIES {identifier}").collect()
    return {r["key"]: r["value"] for r in rows}


def table_columns(spark: SparkSession, identifier: str) -> dict[str, str]:
    """Column name to Spark SQL type of an existing table."""
    schema = spark.table(identifier).schema
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def create_target(
    spark: SparkSession,
    identifier: str,
    columns: dict[str, ColumnType],
    keys: tuple[str, ...],
    properties: dict[str, str] | None = None,
    extra_columns: dict[str, str] | None = None,
    partitioned_by: tuple[str, ...] = (),
    write_order: tuple[str, ...] = (),
    *,
    writer: TableWriter,
    deferred: bool = False,
) -> bool:
    """Create a mirrored table: source columns, the ``_cdc_`` columns, the key as identifier.

    ``properties`` are table properties besides the defaults, set by the CREATE itself;
    ``extra_columns`` (Spark SQL types) follow the source columns (computed columns, the soft
    delete flag); ``partitioned_by`` and ``write_order`` are Iceberg's Spark DDL (transforms; sort
    fields). Returns False when another writer created the table first: only the creator may treat
    it as empty. A plain keyed table is created by ``writer``;
    ``deferred``: the writer may make it with its first rows (``TableWriter.create_keyed``).
    """
    from pyspark.errors import AnalysisException

    definitions = [
        f"{quote(name)} {ctype.spark_type}{' NOT NULL' if name in keys else ''}"
        for name, ctype in columns.items()
    ]
    definitions += [f"{quote(name)} {stype}" for name, stype in (extra_columns or {}).items()]
    definitions += [f"{quote(name)} {stype}" for name, stype in SYSTEM_COLUMNS.items()]
    if keys and not partitioned_by and not write_order:
        typed = {n: c.spark_type for n, c in columns.items()}
        typed |= {**(extra_columns or {}), **SYSTEM_COLUMNS}
        created = writer.create_keyed(identifier, typed, keys, properties or {}, deferred)
        if created is not None:
            return created
    partitioning = f"PARTITIONED BY ({', '.join(partitioned_by)}) " if partitioned_by else ""
    try:
        execute(
            spark,
            f"CREATE TABLE {identifier} ({', '.join(definitions)}) USING iceberg "
            f"{partitioning}TBLPROPERTIES ({_properties(properties)})",
        )
    except AnalysisException as exc:
        if exc.getErrorClass() == "TABLE_OR_VIEW_ALREADY_EXISTS":
            return False
        raise
    if keys:  # a table without a key is append-only: no identifier fields
        keys_sql = ", ".join(quote(k) for k in keys)
        execute(spark, f"ALTER TABLE {identifier} SET IDENTIFIER FIELDS {keys_sql}")
    if write_order:
        execute(spark, f"ALTER TABLE {identifier} WRITE ORDERED BY {', '.join(write_order)}")
    return True


def create_with_identifier(
    spark: SparkSession,
    identifier: str,
    columns: dict[str, str],
    keys: tuple[str, ...],
    properties: dict[str, str],
) -> bool | None:
    """CREATE TABLE of ``columns`` (name -> Spark SQL type) with the key as identifier fields in
    one commit, through Iceberg's catalog API: what Spark's CREATE TABLE then ALTER TABLE SET
    IDENTIFIER FIELDS make, for about half their CPU (a batch may create hundreds of tables).
    False when the table exists already; None when the catalog is not Iceberg's ``SparkCatalog``
    (the caller then uses SQL).
    """
    definitions = [
        f"{quote(name)} {stype}{' NOT NULL' if name in keys else ''}"
        for name, stype in columns.items()
    ]
    catalog, namespace, table = unquoted(identifier)
    # Spark's CREATE TABLE names the owner: so does this.
    stored = {"owner": spark_jvm.current_user(spark), **TABLE_PROPERTIES, **properties}
    parts = (catalog, namespace, table)
    created = spark_jvm.create_iceberg_table(spark, parts, ", ".join(definitions), keys, stored)
    if created:
        committed("iceberg create")
    return created


def unquoted(identifier: str) -> list[str]:
    """The parts of a ``qualified`` identifier (each part backquoted, backquotes doubled)."""
    return [p.replace("``", "`") for p in re.findall(r"`((?:[^`]|``)*)`", identifier)]


def add_columns(spark: SparkSession, identifier: str, columns: dict[str, ColumnType]) -> None:
    """Add nullable columns that newer messages carry."""
    if columns:
        added = ", ".join(f"{quote(n)} {c.spark_type}" for n, c in columns.items())
        execute(spark, f"ALTER TABLE {identifier} ADD COLUMNS ({added})")


def _current_snapshot(spark: SparkSession, identifier: str) -> Any:
    """The table's current snapshot (a JVM object, or None): loaded from the catalog, no job."""
    return spark_jvm.iceberg_table(spark, identifier).currentSnapshot()


def table_property(spark: SparkSession, identifier: str, key: str) -> str | None:
    """One property of an existing table (None when it has none): no Spark job."""
    value = spark_jvm.iceberg_table(spark, identifier).properties().get(key)
    return None if value is None else str(value)


def holds_rows(spark: SparkSession, identifier: str) -> bool:
    """Whether an Iceberg table may hold rows, from its current snapshot: no Spark job.

    False only when the table has no snapshot or its snapshot summary counts no records.
    """
    snapshot = _current_snapshot(spark, identifier)
    if snapshot is None:
        return False
    return str(snapshot.summary().get("total-records")) != "0"


def current_snapshot_facts(spark: SparkSession, identifier: str) -> tuple[int | None, int]:
    """The id of the table's current snapshot (None before its first commit) and the records
    its data files hold (deleted rows included); no Spark job."""
    snapshot = _current_snapshot(spark, identifier)
    if snapshot is None:
        return None, 0
    records = snapshot.summary().get("total-records")
    return int(snapshot.snapshotId()), int(records) if records is not None else 0


def current_snapshot_id(spark: SparkSession, identifier: str) -> int | None:
    """The id of the table's current snapshot (None before its first commit); no Spark job."""
    snapshot = _current_snapshot(spark, identifier)
    return None if snapshot is None else int(snapshot.snapshotId())


class TombstoneIndex:
    """The tables that may have keys in a namespace's ``_cdc_tombstones``, read once per batch.

    A batch of hundreds of tables would otherwise probe the tombstones once per table. The index
    may list a table whose tombstones are gone (a later probe then joins with nothing), never the
    reverse: every write of tombstones, and every rename of their table, is added to it.
    """

    def __init__(self, spark: SparkSession, identifier: str) -> None:
        self.spark, self.identifier = spark, identifier
        self._tables: set[str] | None = None

    def holds(self, table: str) -> bool:
        """Whether ``table`` may have tombstones."""
        if self._tables is None:
            # Set once read whole: tables applied at once (apply/alone_tables) may ask meanwhile.
            tables: set[str] = set()
            if holds_rows(self.spark, self.identifier):
                found = self.spark.table(self.identifier).select("target_table").distinct()
                tables = {r["target_table"] for r in found.collect()}
            self._tables = tables
        return table in self._tables

    def add(self, table: str) -> None:
        """``table`` has tombstones now."""
        if self._tables is not None:
            self._tables.add(table)

    def rename(self, table: str, new: str) -> None:
        """``table``'s tombstones are ``new``'s now."""
        if self.holds(table):
            self.add(new)
