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
5. The snapshot it leaves is recorded in the table's ``cdc.maintained-snapshot-id``
   property: the table's read debt (:mod:`cdc_ingest.read_debt`) counts from it again.

Before them, with ``maintenance.tombstone_retention``, the tombstones of the pipeline's mirrors
written by batches that finished longer ago than the retention are dropped (``expire_tombstones``),
so that the compaction of ``_cdc_tombstones`` applies their deletes at once.

The tables are the pipeline's mirrors (every target table its batches recorded in
``_cdc_batches``) and its namespace's ``_cdc_`` system tables. The whole run holds the
namespace's lock exclusively (see :mod:`cdc_ingest.state.locks`), so it never overlaps an
ingest run; the procedures only rewrite files, so the rows (and the replay of checkpoints) are
unchanged (expired tombstones aside).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from cdc_ingest.catalog_commits import execute
from cdc_ingest.maintenance_config import format_duration
from cdc_ingest.read_debt import MAINTAINED_SNAPSHOT, due_tables, live_files
from cdc_ingest.record.batches import written_tables
from cdc_ingest.spark_session import configure_catalog
from cdc_ingest.sql_text import literal
from cdc_ingest.state.locks import namespace_lock
from cdc_ingest.state.tables import BATCHES, SYSTEM_TABLES, TOMBSTONES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
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
    due: str | None = None  # why its triggers made it due, in a run of the due tables only
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
    tombstones_expired: int = 0
    tombstone_retention: str | None = None  # as the config gives it (``7d``), if set
    due_only: bool = False  # only the tables the triggers made due, without orphan removal

    def to_json(self) -> str:
        """The summary as one JSON object (the last line of ``maintain --json``)."""
        return json.dumps(asdict(self), sort_keys=True)

    def render(self) -> str:
        """Human-readable lines, one per table."""
        scope = " due for it" if self.due_only else ""
        lines = [f"pipeline {self.pipeline}: maintained {len(self.tables)} tables{scope}"]
        for t in self.tables:
            if t.due is not None:
                lines.append(f"  {t.table}: due: {t.due}")
            lines.append(
                f"  {t.table}: data files {t.data_files[0]} -> {t.data_files[1]}, "
                f"delete files {t.delete_files[0]} -> {t.delete_files[1]}, "
                f"snapshots {t.snapshots[0]} -> {t.snapshots[1]}, "
                f"orphans removed {t.orphan_files_removed}"
            )
        if self.tombstone_retention is not None:
            lines.append(
                f"  tombstones older than {self.tombstone_retention} dropped: "
                f"{self.tombstones_expired}"
            )
        return "\n".join(lines)


def _options(options: dict[str, str]) -> str:
    return "map(" + ", ".join(f"'{k}', '{v}'" for k, v in options.items()) + ")"


def _timestamp(moment: datetime) -> str:
    # The job's session time zone is UTC (spark_session.session_conf).
    return f"TIMESTAMP '{moment.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def _counts(loaded: Table) -> tuple[int, int, int]:
    """A loaded table's live data files, live delete files and snapshots (from its metadata: no
    Spark job)."""
    return (*live_files(loaded), len(loaded.metadata.snapshots))


def _files(lake: Catalog, namespace: str, table: str) -> tuple[Table, tuple[int, int, int]]:
    """A table freshly loaded, with its counts."""
    loaded = lake.load_table((namespace, table))
    return loaded, _counts(loaded)


def pipeline_tables(spark: SparkSession, config: Config, pipeline: PipelineConfig) -> list[str]:
    """The existing tables the pipeline writes: its mirrors, their history tables and the
    namespace's system tables."""
    return _NamespaceTables.read(spark, config, pipeline).maintained(pipeline)


@dataclass(frozen=True)
class _NamespaceTables:
    """The tables of a pipeline's namespace, and the mirrors each of its pipelines' batches
    recorded in ``_cdc_batches``: read once per maintenance run."""

    existing: frozenset[str]
    mirrors: dict[str, set[str]]

    @staticmethod
    def read(spark: SparkSession, config: Config, pipeline: PipelineConfig) -> _NamespaceTables:
        catalog, namespace = config.catalog.name, pipeline.namespace
        shown = spark.sql(f"SHOW TABLES IN {catalog}.{namespace}").collect()
        existing = frozenset(row["tableName"] for row in shown)
        batches = f"{catalog}.{namespace}.{BATCHES}"
        mirrors = written_tables(spark, batches) if BATCHES in existing else {}
        return _NamespaceTables(existing, mirrors)

    def maintained(self, pipeline: PipelineConfig) -> list[str]:
        mirrors = self.mirrors.get(pipeline.name, set())
        system = {t for t in SYSTEM_TABLES if t in self.existing}
        # The history tables of its mirrors (``history: scd2``) take the same compaction.
        histories = set(pipeline.tables.history_tables(sorted(mirrors)).values())
        return sorted(system | ((mirrors | histories) & self.existing))


def expire_tombstones(
    spark: SparkSession,
    config: Config,
    pipeline: PipelineConfig,
    now: datetime,
    tables: _NamespaceTables,
) -> int:
    """Drop the tombstones (``_cdc_tombstones``) of the pipeline's mirrors that batches of its
    own finished before ``now`` less ``maintenance.tombstone_retention`` wrote (a key deleted
    again since keeps its tombstone: the later delete's batch is on it); returns how many.

    A mirror another pipeline of the namespace writes too keeps its tombstones: a tombstone names
    a batch, not the pipeline whose batch it is. Nothing expires without a retention.
    """
    retention = pipeline.maintenance.tombstone_retention
    catalog, namespace = config.catalog.name, pipeline.namespace
    if retention is None or TOMBSTONES not in tables.existing:
        return 0
    written = tables.mirrors
    others = {t for p, held in written.items() if p != pipeline.name for t in held}
    mine = sorted(written.get(pipeline.name, set()) - others)
    if not mine:
        return 0
    # Batch ids grow with each batch of a pipeline, and its batches run one after another.
    last = spark.sql(
        f"SELECT max(batch_id) AS batch FROM {catalog}.{namespace}.{BATCHES} "
        f"WHERE pipeline = {literal(pipeline.name)} "
        f"AND finished_at < {_timestamp(now - retention)}"
    ).first()
    if last is None or last["batch"] is None:
        return 0
    named = ", ".join(literal(t) for t in mine)
    where = f"target_table IN ({named}) AND batch_id <= {int(last['batch'])}"
    identifier = f"{catalog}.{namespace}.{TOMBSTONES}"
    counted = spark.sql(f"SELECT count(*) AS n FROM {identifier} WHERE {where}").first()
    expired = int(counted["n"]) if counted is not None else 0
    if expired:
        execute(spark, f"DELETE FROM {identifier} WHERE {where}").collect()
    return expired


def _rewrite_position_deletes(
    spark: SparkSession, catalog: str, target: str, result: TableMaintenance
) -> int:
    """Compact the position deletes rewrite_data_files left; returns the delete files rewritten."""
    row = spark.sql(
        f"CALL {catalog}.system.rewrite_position_delete_files(table => {target}, "
        f"options => {_options(REWRITE_DELETES_OPTIONS)})"
    ).first()
    return int(row["rewritten_delete_files_count"]) if row is not None else 0


def _on_local_disk(table: Table) -> bool:
    """Whether a table lives on a local or Hadoop filesystem (its location has no object store
    scheme)."""
    return not table.location().startswith(("s3://", "s3a://", "s3n://", "gs://", "abfs"))


def _mark_maintained(spark: SparkSession, name: str, table: Table) -> None:
    """Record the snapshot maintenance left (``table`` as loaded after it), from which the
    table's read debt counts again. Through Spark: pyiceberg 0.12 writes no v3 metadata."""
    snapshot = table.current_snapshot()
    if snapshot is not None:
        execute(
            spark,
            f"ALTER TABLE {name} SET TBLPROPERTIES "
            f"('{MAINTAINED_SNAPSHOT}' = '{snapshot.snapshot_id}')",
        ).collect()


def _remove_orphans(
    spark: SparkSession,
    catalog: str,
    table: Table,
    target: str,
    now: datetime,
    pipeline: PipelineConfig,
) -> int:
    """``remove_orphan_files`` on one table; returns how many files it removed."""
    # Object stores have no directories for Hadoop to walk (and no s3:// Hadoop filesystem is on
    # the classpath): list by prefix through the table's own FileIO there.
    prefix_listing = "" if _on_local_disk(table) else ", prefix_listing => true"
    orphans = spark.sql(
        f"CALL {catalog}.system.remove_orphan_files(table => {target}, "
        f"older_than => {_timestamp(now - pipeline.maintenance.orphan_older_than)}"
        f"{prefix_listing})"
    ).collect()
    return len(orphans)


def _lake(config: Config) -> Catalog:
    """The pyiceberg catalog the tables' files and debts are counted through."""
    from cdc_ingest.state.lake import open_catalog

    lake: Catalog = open_catalog(config.catalog)
    return lake


def _maintain_table(
    spark: SparkSession,
    lake: Catalog,
    catalog: str,
    namespace: str,
    table: str,
    pipeline: PipelineConfig,
    now: datetime | None,
    due: str | None = None,
    loaded: Table | None = None,
) -> TableMaintenance:
    """``loaded``: the table as its due check just loaded it, counted before instead of a reload."""
    target = f"'{namespace}.{table}'"
    before = _counts(loaded) if loaded is not None else _files(lake, namespace, table)[1]
    data_before, deletes_before, snapshots_before = before
    result = TableMaintenance(table, due)
    rewrite = spark.sql(
        f"CALL {catalog}.system.rewrite_data_files(table => {target}, "
        f"options => {_options(REWRITE_DATA_OPTIONS)})"
    ).first()
    if rewrite is not None:
        result.rewritten_data_files = int(rewrite["rewritten_data_files_count"])
        result.added_data_files = int(rewrite["added_data_files_count"])
    if _files(lake, namespace, table)[1][1]:
        result.removed_delete_files = _rewrite_position_deletes(spark, catalog, target, result)
    # After the rewrites: a count of snapshots to keep counts the compaction's.
    now = now or datetime.now(UTC)
    retain = pipeline.maintenance.retain_snapshots
    if isinstance(retain, timedelta):
        older_than, retain_last = now - retain, 1
    else:
        older_than, retain_last = now, retain
    spark.sql(
        f"CALL {catalog}.system.expire_snapshots(table => {target}, "
        f"older_than => {_timestamp(older_than)}, retain_last => {retain_last})"
    ).collect()
    loaded, (data_after, deletes_after, snapshots_after) = _files(lake, namespace, table)
    if result.due is None:
        result.orphan_files_removed = _remove_orphans(spark, catalog, loaded, target, now, pipeline)
    _mark_maintained(spark, f"{catalog}.{namespace}.{table}", loaded)
    result.data_files = (data_before, data_after)
    result.delete_files = (deletes_before, deletes_after)
    result.snapshots = (snapshots_before, snapshots_after)
    return result


def maintain_pipeline(
    spark: SparkSession,
    config: Config,
    pipeline_name: str,
    now: datetime | None = None,
    due_only: bool = False,
) -> MaintenanceSummary:
    """Compact, expire and clean every table the pipeline writes, holding the namespace's lock;
    ``now``: the moment every age is measured from (the clock's, unless a test sets it).

    ``due_only`` (``maintain --due``, what a batch's maintenance event runs): only the tables
    whose ``maintenance.triggers`` make them due (:mod:`cdc_ingest.read_debt`) are compacted and
    their snapshots expired; tombstones and orphan files wait for the full run of the schedule.

    Raises:
        ConfigError: unknown pipeline.
        NamespaceLocked: an ingest run kept the namespace for longer than
            ``maintenance.lock_wait``.
    """
    pipeline = config.pipeline(pipeline_name)
    configure_catalog(spark, config.catalog)
    summary = MaintenanceSummary(pipeline.name, pipeline.namespace, due_only=due_only)
    retention = pipeline.maintenance.tombstone_retention
    if retention is not None and not due_only:
        summary.tombstone_retention = format_duration(retention)
    with namespace_lock(
        config.catalog,
        pipeline.namespace,
        exclusive=True,
        wait=pipeline.maintenance.lock_wait,
        purpose="maintenance",
    ):
        if not spark.catalog.databaseExists(f"{config.catalog.name}.{pipeline.namespace}"):
            return summary
        tables = _NamespaceTables.read(spark, config, pipeline)
        moment = now or datetime.now(UTC)
        maintained = tables.maintained(pipeline)
        lake = _lake(config)
        due: dict[str, str | None] = dict.fromkeys(maintained)
        loaded: dict[str, Table] = {}
        if due_only:
            loaded = {t: lake.load_table((pipeline.namespace, t)) for t in maintained}
            due = dict(due_tables(loaded, pipeline.maintenance.triggers))
        else:
            summary.tombstones_expired = expire_tombstones(spark, config, pipeline, moment, tables)
        for table, why in due.items():
            summary.tables.append(
                _maintain_table(
                    spark,
                    lake,
                    config.catalog.name,
                    pipeline.namespace,
                    table,
                    pipeline,
                    now,
                    why,
                    loaded.get(table),
                )
            )
    return summary
