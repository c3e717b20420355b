"""Tables written before the ordering value was stored as ``binary`` (``cdc_ingest.ordering``):
their ``_cdc_order`` is an ``array<bigint>``, migrated when a batch first meets the table.

Iceberg cannot change a list column into a primitive, so the migration is three commits, each
chosen from the table's schema alone, so that a run stopped between two of them is completed by the
next run (the pipeline's lock keeps two batches from doing it at once):

1. ``ADD COLUMN _cdc_order_binary`` (the list's schema, no staged column yet);
2. every row rewritten with its order encoded into it, in one overwrite (no delete file stays),
   then, in one schema commit, the list dropped and the new column renamed ``_cdc_order`` (a run
   stopped between the two rewrites the rows again: the same values);
3. nothing, once ``_cdc_order`` is ``binary``.

Old snapshots keep their schema: time travel to them still reads the list.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest import ordering, spark_jvm
from cdc_ingest.catalog_commits import committed, execute, overwrite
from cdc_ingest.stages import stage
from cdc_ingest.state.tables import (
    DDL_HISTORY,
    ORDER_COLUMN,
    TOMBSTONES,
    current_snapshot_id,
    qualified,
    quote,
    unquoted,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.writers.protocol import TableWriter

log = logging.getLogger(__name__)

LEGACY_TYPE = "array<bigint>"
# The binary column while both exist.
STAGED_COLUMN = "_cdc_order_binary"


def needs_migration(columns: dict[str, str]) -> bool:
    """Whether a table with these columns (name -> Spark SQL type) still stores the list."""
    return columns.get(ORDER_COLUMN) == LEGACY_TYPE or STAGED_COLUMN in columns


def migrate_system_tables(
    spark: SparkSession,
    catalog: str,
    namespace: str,
    existing: set[str],
    writer: TableWriter,
) -> None:
    """Migrate the namespace's system tables that store an ordering value (``_cdc_tombstones``,
    ``_cdc_ddl_history``); their columns read by the run's writer (pyiceberg's: a load each,
    a few ms)."""
    for name in (TOMBSTONES, DDL_HISTORY):
        if name not in existing:
            continue
        identifier = qualified(catalog, namespace, name)
        columns, _ = writer.table_facts(identifier)
        migrate_stored_order(spark, identifier, columns)


def migrate_stored_order(spark: SparkSession, identifier: str, columns: dict[str, str]) -> bool:
    """Bring a table's ``_cdc_order`` to ``binary`` (see the module); False when it was already.

    ``columns``: the table's columns as its caller read them (name -> Spark SQL type).
    """
    if not needs_migration(columns):
        return False
    with stage("migrate _cdc_order"):
        if STAGED_COLUMN not in columns:
            execute(
                spark,
                f"ALTER TABLE {identifier} ADD COLUMN {quote(STAGED_COLUMN)} binary "
                f"AFTER {quote(ORDER_COLUMN)}",
            )
        if columns.get(ORDER_COLUMN) == LEGACY_TYPE:
            # Read after the snapshot it is validated from: the overwrite replaces every file, so
            # a row another writer added since would be lost (it fails instead, and the rerun
            # migrates again). Not a time-travel read: that takes the snapshot's schema, which
            # lacks the staged column.
            snapshot = current_snapshot_id(spark, identifier)
            rows = spark.table(identifier)
            encoded = rows.withColumn(STAGED_COLUMN, F.expr(ordering.encoded_sql(ORDER_COLUMN)))
            writer = encoded.writeTo(identifier).option("isolation-level", "serializable")
            if snapshot is not None:
                writer = writer.option("validate-from-snapshot-id", str(snapshot))
            migrated = writer.option("snapshot-property.cdc.migration", "binary _cdc_order")
            overwrite(migrated, F.lit(True))
        _swap_columns(spark, identifier, drop=columns.get(ORDER_COLUMN) == LEGACY_TYPE)
    log.info("%s: _cdc_order migrated to binary", identifier)
    return True


def _swap_columns(spark: SparkSession, identifier: str, drop: bool) -> None:
    """Drop the list (when ``drop``) and give the binary column its name, in one schema commit
    through Iceberg's API (Spark's ALTER TABLE would make two, with a moment without
    ``_cdc_order`` between them)."""
    catalog, namespace, table = unquoted(identifier)
    parts = (catalog, namespace, table)
    if spark_jvm.rename_column_over(spark, parts, STAGED_COLUMN, ORDER_COLUMN, drop):
        committed("iceberg schema commit", identifier)
        spark.sql(f"REFRESH TABLE {identifier}")
        return
    # Not Iceberg's SparkCatalog: two statements.
    if drop:
        execute(spark, f"ALTER TABLE {identifier} DROP COLUMN {quote(ORDER_COLUMN)}")
    execute(
        spark,
        f"ALTER TABLE {identifier} RENAME COLUMN {quote(STAGED_COLUMN)} TO {quote(ORDER_COLUMN)}",
    )
