"""Tables the batch creates, applied together (``groups``).

A table this run created holds no rows, and one without tombstones has no deleted keys either,
so applying its changes needs no join: type them, keep each key's newest change, count, append.
Each table's rows are appended by a commit of its own, from the rows its group collected where
the writer takes them (``writers``: pyiceberg's appends, rather than a Spark job per table). The
group's tombstones (deletes of keys the tables never held) go into ``_cdc_tombstones`` in one
commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest.apply.actions import DELETED_WRITTEN, INSERT
from cdc_ingest.apply.classify import classify
from cdc_ingest.apply.commit_notes import commit_properties, counts_properties, notes_properties
from cdc_ingest.apply.groups import TARGET, WRITE_REFUSED, GroupMember, TableGroup
from cdc_ingest.apply.keyed_writes import append_target, append_tombstones
from cdc_ingest.apply.outcomes import table_summary
from cdc_ingest.apply.soft_deletes import with_flags
from cdc_ingest.stages import stage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class CreatedGroup(TableGroup):
    """Tables created by this run, classified together; each then appended on its own."""

    created = True

    def classify(self, changes: DataFrame) -> None:
        """Type, collapse and count every table's changes: one plan, one shuffle, one job."""
        typed = self._typed_changes(self._changes_of_group(changes))
        newest = self._collapsed(typed)
        # A created table holds no rows and (see WritePolicy.route) no tombstones: only the kind of
        # each key's newest change decides, for every table of the group alike.
        classified = classify(self.spark, newest, self.tables[0].target, tombstones=False)
        counts = self._materialized(self._with_values(classified))
        self._typed = typed
        for table in self.tables:
            name = table.target.name
            ignored = self._ignored.get(name, 0)
            summary = table_summary(name, counts.get((name,), {}), table.rows, ignored)
            summary.created = True
            self.summaries[name] = summary

    def write_tables(self) -> dict[str, Exception]:
        """Write the tables one after another (from their collected rows where the writer takes
        them, registered together after the last write)."""
        refusals: dict[str, Exception] = {}
        with self.writer.created_together():
            for table in self.tables:
                try:
                    self.write(table)
                except WRITE_REFUSED as exc:
                    refusals[table.target.name] = exc
        return refusals

    def write(self, table: GroupMember) -> None:
        """Append one table's inserts, its counts on the commit: from its collected rows where
        the writer takes them, else by a Spark job."""
        writer = self.writer
        target = table.target
        summary = self.summaries[target.name]
        if not self._written(target.name):
            writer.create_pending(target.identifier)  # deferred to its rows: it has none
            return
        note = counts_properties(self.batch, target.name, "0", self._outcome(summary))
        if writer.appends_collected:
            with stage("append to created table"):
                rows = self._arrow_rows(target.name)
                if self.soft:
                    rows = with_flags(rows)
                if writer.append_arrow(target.identifier, rows, note):
                    return
        with commit_properties(self.spark, note), stage("append to created table"):
            # Fewer than group_rows rows: one task writes them as one file (not one per part).
            mine = self._table_frame(target.name).coalesce(1)
            append_target(mine, target, self.batch)

    @property
    def written_actions(self) -> tuple[str, ...]:
        """The actions whose rows a table's write takes (``_arrow_rows``): with soft deletes, a
        delete that writes its upsert's row too (``soft_deletes``)."""
        return (INSERT, DELETED_WRITTEN) if self.soft else (INSERT,)

    def write_tombstones(self, applied: set[str]) -> list[str]:
        """One ``_cdc_tombstones`` commit for the deletes of the ``applied`` tables; returns the
        tables that have tombstones now. Tables without inserts of their own note their counts on
        it (a table with inserts noted them on its own commit)."""
        tombstones = self.tables[0].target.tombstones
        deleting = [
            n for n, s in self.summaries.items() if n in applied and (s.deleted_absent or s.deleted)
        ]
        if not deleting:
            return []
        notes = [
            (n, "0", self._outcome(self.summaries[n])) for n in deleting if not self._written(n)
        ]
        properties = notes_properties(self.batch, notes) if notes else {}
        with commit_properties(self.spark, properties), stage("append first tombstones"):
            mine = self._frame().where(F.col(TARGET).isin(*deleting))
            append_tombstones(mine, tombstones, self.batch, F.col(TARGET))
        return deleting
