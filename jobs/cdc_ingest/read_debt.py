"""What a table's readers pay for the micro-batches since its last maintenance, and whether its
``maintenance.triggers`` make maintenance due.

Read from the table's metadata with pyiceberg (snapshot summaries, no manifest), so that Airflow's
side measures it after each batch without a JVM, as Iceberg's Flink ``TableMaintenance`` counts
commits and delete files before it schedules a rewrite:

- the live data files and delete files of the current snapshot (its summary's totals);
- the commits since the last maintenance that left readers more to open: each added delete
  files, or more data files than it removed, of an average size Iceberg's compaction would
  rewrite (under three quarters of the table's target file size). The count stops at the last
  compaction (a ``replace`` snapshot) or at the snapshot ``maintain`` recorded in the table's
  ``cdc.maintained-snapshot-id`` property, whichever is later, so that a table compaction
  had nothing to rewrite in is not due again at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

    from cdc_ingest.maintenance_config import MaintenanceTriggers

MAINTAINED_SNAPSHOT = "cdc.maintained-snapshot-id"
TARGET_FILE_SIZE = "write.target-file-size-bytes"
DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
# Iceberg's bin-pack compaction rewrites files under this share of the target size.
SMALL_SHARE = 0.75
# A few delete files are no debt, whatever the ratio: a small table's first MERGE makes one.
MIN_DELETE_FILES = 4
# How far back the count looks: a table past it is due whatever the trigger is.
MAX_WALK = 10_000


def _count(snapshot: Snapshot, key: str) -> int:
    summary = snapshot.summary
    return int(summary.get(key, "0") or 0) if summary is not None else 0


def live_files(table: Table) -> tuple[int, int]:
    """The live data files and delete files of ``table``'s current snapshot (its summary's
    totals, which every Iceberg writer carries forward: no manifest is read)."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return 0, 0
    return _count(snapshot, "total-data-files"), _count(snapshot, "total-delete-files")


@dataclass(frozen=True)
class ReadDebt:
    """A table's read debt: its live files, and its commits since the last maintenance that
    added small or delete files."""

    data_files: int = 0
    delete_files: int = 0
    commits: int = 0

    @staticmethod
    def of(table: Table) -> ReadDebt:
        """The debt of ``table`` as its current metadata records it."""
        snapshot = table.current_snapshot()
        if snapshot is None:
            return ReadDebt()
        target = int(table.properties.get(TARGET_FILE_SIZE, DEFAULT_TARGET_FILE_SIZE))
        small = SMALL_SHARE * target
        maintained = table.properties.get(MAINTAINED_SNAPSHOT)
        commits = 0
        current: Snapshot | None = snapshot
        for _ in range(MAX_WALK):
            if current is None or str(current.snapshot_id) == maintained:
                break
            summary = current.summary
            if summary is not None and summary.operation.value == "replace":
                break
            added = _count(current, "added-data-files")
            grew = added > _count(current, "deleted-data-files")
            size = _count(current, "added-files-size")
            if _count(current, "added-delete-files") or (grew and size < small * added):
                commits += 1
            parent = current.parent_snapshot_id
            current = None if parent is None else table.snapshot_by_id(parent)
        return ReadDebt(*live_files(table), commits)

    def due(self, triggers: MaintenanceTriggers | None) -> str | None:
        """Why maintenance is due under ``triggers`` (None: not due)."""
        if triggers is None:
            return None
        if triggers.commits is not None and self.commits >= triggers.commits:
            commits = "1 commit" if self.commits == 1 else f"{self.commits} commits"
            return (
                f"{commits} of small or delete files since its last maintenance "
                f"(trigger: {triggers.commits})"
            )
        ratio = triggers.delete_files_per_data_file
        if (
            ratio is not None
            and self.delete_files >= MIN_DELETE_FILES
            and self.delete_files >= ratio * max(self.data_files, 1)
        ):
            return (
                f"{self.delete_files} delete files on {self.data_files} data files "
                f"(trigger: {ratio:g} per data file)"
            )
        return None


def due_tables(tables: Mapping[str, Table], triggers: MaintenanceTriggers | None) -> dict[str, str]:
    """The tables (name -> loaded table) whose read debt makes maintenance due under
    ``triggers``, each with why."""
    if triggers is None:
        return {}
    found = ((name, ReadDebt.of(table).due(triggers)) for name, table in tables.items())
    return {name: why for name, why in found if why is not None}
