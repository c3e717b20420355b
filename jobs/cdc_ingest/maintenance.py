"""``cdc-ingest maintain``: compact and clean up the Iceberg tables a pipeline writes.

Per table, with Iceberg's Spark procedures:

1. ``rewrite_data_files``: small data files merged, and data files carrying position deletes
   rewritten with the deletes applied (merge-on-read leaves one delete file per batch that
   touched a file), and their delete files dropped.
2. ``rewrite_position_delete_files``, when position deletes remain after that: compacted,
   dangling ones removed (Iceberg 1.12 runs it on tables with list columns, as mirrors had in
   ``_cdc_order`` before it was stored as ``binary``; 1.10 refused them).
3. ``expire_snapshots``: snapshots older than ``maintenance.retain_snapshots`` (a duration; the
   current one is always kept) or beyond the last N (a count), and the files only they reference.
4. ``remove_orphan_files``: files no snapshot references, older than
   ``maintenance.orphan_older_than`` (left by failed writes).

The tables are the pipeline's mirrors (every target table its batches recorded in
``_cdc_batches``) and its namespace's ``_cdc_`` system tables. The whole run holds the
namespace's lock exclusively (see :mod:`cdc_ingest.state.locks`), so it never overlaps an
ingest run; the procedures only rewrite files, so the rows (and the replay of checkpoints) are
unchanged.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from cdc_ingest.spark_session import configure_catalog
from cdc_ingest.state.locks import namespace_lock
from cdc_ingest.state.tables import BATCHES, SYSTEM_TABLES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.config import Config, PipelineConfig

# Compact as soon as there are two files, and rewrite any data file that has a delete file. The
# rewritten files take a new sequence number (safe: the namespace lock keeps writers out), so every
# position delete is then older than all data and dropped as dangling.
REWRITE_DATA_OPTIONS = {
    "min-input-files": "2",
    "delete-file-threshold": "1",
    "use-starting-sequence-number": "false",
    "remove-dangling-deletes": "true",
}
REWRITE_DELETES_OPTIONS = {"rewrite-all": "true"}


@dataclass
class TableMaintenance:
    """What maintenance did to one table."""

    table: str
    data_files: tuple[int, int] = (0, 0)  # before, after
    delete_files: tuple[int, int] = (0, 0)
    snapshots: tuple[int, int] = (0, 0)
    rewritten_data_files: int = 0
    added_data_files: int = 0
    removed_delete_files: int = 0
    orphan_files_removed: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class MaintenanceSummary:
    """One maintenance run of a pipeline's tables."""

    pipeline: str
    namespace: str
    tables: list[TableMaintenance] = field(default_factory=list)

    def to_json(self) -> str:
        """The summary as one JSON object (the last line of ``maintain --json``)."""
        return json.dumps(asdict(self), sort_keys=True)

    def render(self) -> str:
        """Human-readable lines, one per table."""
        lines = [f"pipeline {self.pipeline}: maintained {len(self.tables)} tables"]
        for t in self.tables:
            lines.append(
                f"  {t.table}: data files {t.data_files[0]} -> {t.data_files[1]}, "
                f"delete files {t.delete_files[0]} -> {t.delete_files[1]}, "
                f"snapshots {t.snapshots[0]} -> {t.snapshots[1]}, "
                f"orphans removed {t.orphan_files_removed}"
            )
        return "\n".join(lines)


def _options(options: dict[str, str]) -> str:
    return "map(" + ", ".join(f"'{k}', '{v}'" for k, v in options.items()) + ")"


def _timestamp(moment: datetime) -> str:
    # The job's session time zone is UTC (spark_session.session_conf).
    return f"TIMESTAMP '{moment.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def _counts(spark: SparkSession, name: str) -> tuple[int, int, int]:
    """Live data files, live delete files and snapshots of a table."""
    by_content = {
        row["content"]: row["n"]
        for row in spark.sql(
            f"SELECT content, count(*) AS n FROM {name}.files GROUP BY content"
        ).collect()
    }
    deletes = sum(n for content, n in by_content.items() if content != 0)
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {name}.snapshots").first()
    return by_content.get(0, 0), deletes, int(snapshots["n"]) if snapshots else 0


def pipeline_tables(spark: SparkSession, config: Config, pipeline: PipelineConfig) -> list[str]:
    """The existing tables the pipeline writes: its mirrors, their history tables and the
    namespace's system tables."""
    catalog, namespace = config.catalog.name, pipeline.namespace
    existing = {
        row["tableName"] for row in spark.sql(f"SHOW TABLES IN {catalog}.{namespace}").collect()
    }
    mirrors: set[str] = set()
    if BATCHES in existing:
        # Pipeline names are [a-z0-9_]+ (checked when the config loads): safe inside quotes.
        summaries = spark.sql(
            f"SELECT summary FROM {catalog}.{namespace}.{BATCHES} "
            f"WHERE pipeline = '{pipeline.name}'"
        ).collect()
        for row in summaries:
            mirrors.update(json.loads(row["summary"]).get("tables", {}))
    system = {t for t in SYSTEM_TABLES if t in existing}
    # The history tables of its mirrors (``history: scd2``) take the same compaction.
    histories = set(pipeline.tables.history_tables(sorted(mirrors)).values())
    return sorted(system | ((mirrors | histories) & existing))


def _rewrite_position_deletes(
    spark: SparkSession, catalog: str, target: str, result: TableMaintenance
) -> int:
    """Compact the position deletes rewrite_data_files left; returns the delete files rewritten."""
    row = spark.sql(
        f"CALL {catalog}.system.rewrite_position_delete_files(table => {target}, "
        f"options => {_options(REWRITE_DELETES_OPTIONS)})"
    ).first()
    return int(row["rewritten_delete_files_count"]) if row is not None else 0


def _on_local_disk(spark: SparkSession, name: str) -> bool:
    """Whether a table lives on a local or Hadoop filesystem (its location has no object store
    scheme)."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    location = next((r["data_type"] for r in rows if r["col_name"] == "Location"), "")
    return not str(location).startswith(("s3://", "s3a://", "s3n://", "gs://", "abfs"))


def _maintain_table(
    spark: SparkSession, catalog: str, namespace: str, table: str, pipeline: PipelineConfig
) -> TableMaintenance:
    name = f"{catalog}.{namespace}.{table}"
    target = f"'{namespace}.{table}'"
    data_before, deletes_before, snapshots_before = _counts(spark, name)
    result = TableMaintenance(table)
    rewrite = spark.sql(
        f"CALL {catalog}.system.rewrite_data_files(table => {target}, "
        f"options => {_options(REWRITE_DATA_OPTIONS)})"
    ).first()
    if rewrite is not None:
        result.rewritten_data_files = int(rewrite["rewritten_data_files_count"])
        result.added_data_files = int(rewrite["added_data_files_count"])
    if _counts(spark, name)[1]:
        result.removed_delete_files = _rewrite_position_deletes(spark, catalog, target, result)
    now = datetime.now(UTC)
    retain = pipeline.maintenance.retain_snapshots
    if isinstance(retain, timedelta):
        older_than, retain_last = now - retain, 1
    else:
        older_than, retain_last = now, retain
    spark.sql(
        f"CALL {catalog}.system.expire_snapshots(table => {target}, "
        f"older_than => {_timestamp(older_than)}, retain_last => {retain_last})"
    ).collect()
    # Object stores have no directories for Hadoop to walk (and no s3:// Hadoop filesystem is on
    # the classpath): list by prefix through the table's own FileIO there.
    prefix_listing = "" if _on_local_disk(spark, name) else ", prefix_listing => true"
    orphans = spark.sql(
        f"CALL {catalog}.system.remove_orphan_files(table => {target}, "
        f"older_than => {_timestamp(now - pipeline.maintenance.orphan_older_than)}"
        f"{prefix_listing})"
    ).collect()
    result.orphan_files_removed = len(orphans)
    data_after, deletes_after, snapshots_after = _counts(spark, name)
    result.data_files = (data_before, data_after)
    result.delete_files = (deletes_before, deletes_after)
    result.snapshots = (snapshots_before, snapshots_after)
    return result


def maintain_pipeline(
    spark: SparkSession, config: Config, pipeline_name: str
) -> MaintenanceSummary:
    """Compact, expire and clean every table the pipeline writes, holding the namespace's lock.

    Raises:
        ConfigError: unknown pipeline.
        NamespaceLocked: an ingest run kept the namespace for longer than
            ``maintenance.lock_wait``.
    """
    pipeline = config.pipeline(pipeline_name)
    configure_catalog(spark, config.catalog)
    summary = MaintenanceSummary(pipeline.name, pipeline.namespace)
    with namespace_lock(
        config.catalog,
        pipeline.namespace,
        exclusive=True,
        wait=pipeline.maintenance.lock_wait,
        purpose="maintenance",
    ):
        if not spark.catalog.databaseExists(f"{config.catalog.name}.{pipeline.namespace}"):
            return summary
        for table in pipeline_tables(spark, config, pipeline):
            summary.tables.append(
                _maintain_table(spark, config.catalog.name, pipeline.namespace, table, pipeline)
            )
    return summary
