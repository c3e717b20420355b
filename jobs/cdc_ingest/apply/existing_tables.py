"""Tables that hold rows already, classified together: one typing, collapse, join and count for
many tables, then a rewrite or a ``MERGE INTO`` each.

The batch after a topic's first carries changes to the tables that batch created. Done one table at
a time (``keyed.apply_table``), each pays a typed plan, a collapse shuffle, a join with the table
and a counting job before its MERGE, a large part of what a small table costs. Here the tables
whose columns agree and whose key is the same (``existing_groups``) share those: their newest
change per key is joined once with the union of their keys and orders (small tables' read by
the writer into one local relation, the others by one SQL statement, so that three hundred tables
cost one analysis, not a growing plan per table) and with their tombstones, then counted in one
job (``groups.TableGroup``'s: a group of few changes is collected and counted in the driver).
Each table is still written by a commit of its own, carrying its counts, from the materialized
classification: a small one (at most ``rewritten_rows`` rows, no delete files) rewritten whole
by the writer from the group's changes collected as Arrow in one job
(``snapshots/copy_on_write``), any other merged (appended where it only gains keys:
``outcomes.inserts_only``), several at once (``concurrent_writes``). The group's tombstones are
written in one commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest.apply.actions import DELETED, DELETED_ABSENT, DELETED_WRITTEN, INSERT, UPDATE
from cdc_ingest.apply.classify import ActionCounts, with_actions
from cdc_ingest.apply.commit_notes import (
    PipelineBatch,
    commit_properties,
    counts_properties,
    notes_properties,
)
from cdc_ingest.apply.concurrent_writes import write_each
from cdc_ingest.apply.few_keys import few_changes, rows_of_keys
from cdc_ingest.apply.groups import TARGET, WRITE_REFUSED, GroupMember, TableGroup, layout_groups
from cdc_ingest.apply.keyed_writes import (
    append_target,
    append_tombstones,
    merge_target,
    merge_tombstones,
)
from cdc_ingest.apply.outcomes import (
    inserts_only,
    moves_held_tombstones,
    table_summary,
    tombstoned,
)
from cdc_ingest.apply.soft_deletes import with_flag, with_flags
from cdc_ingest.arrow_frames import arrow_frame, small_offsets, string_array
from cdc_ingest.stages import stage
from cdc_ingest.state.tables import (
    ORDER_COLUMN,
    TombstoneIndex,
    current_snapshot_facts,
    current_snapshot_id,
    quote,
)
from cdc_ingest.state.tables import sql_string as literal
from cdc_ingest.table_options import DELETED_COLUMN

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.apply.write_policy import WritePolicy
    from cdc_ingest.schema.target import TargetTable
    from cdc_ingest.writers.protocol import TableWriter


def _named_rows(rows: pa.Table, name: str, keys: tuple[str, ...]) -> pa.Table:
    """A table's keys and orders (and soft-delete flags) as the classification joins them
    (``_t_`` names, its name)."""
    import pyarrow as pa

    columns = [pa.array([name] * rows.num_rows, pa.string())]
    columns += [rows.column(k) for k in keys] + [rows.column(ORDER_COLUMN)]
    names = ["_t_target", *(f"_t_{k}" for k in keys), "_t_order"]
    if DELETED_COLUMN in rows.column_names:
        columns.append(rows.column(DELETED_COLUMN))
        names.append("_t_deleted")
    # pyiceberg reads a binary or string column as large_binary or binary depending on the
    # table's files (Spark's or its own): the group's tables must agree to be concatenated.
    columns = [c.cast(small_offsets(c.type)) for c in columns]
    return pa.Table.from_arrays(columns, names=names)


def existing_groups(tables: list[GroupMember]) -> list[list[GroupMember]]:
    """The tables in groups of one key (the same columns, of the same types) that delete alike
    (``layout_groups``): the key's columns then hold the same slots in every table's rows, and
    join with the tables' rows by their names."""
    by_key: dict[tuple[object, ...], list[GroupMember]] = {}
    for table in tables:
        target = table.target
        key = (target.keys, tuple(target.columns.get(k) for k in target.keys))
        by_key.setdefault(key, []).append(table)
    return [group for same in by_key.values() for group in layout_groups(same)]


class HoldingGroup(TableGroup):
    """Tables holding rows, classified together; each then rewritten or merged on its own.

    Args:
        spark: the session.
        tables: the group (see ``existing_groups``).
        batch: the batch.
        writes: the run's write policy (``write_policy``).
        writer: what writes the tables (``writers``), which may read and rewrite small ones.
        tombstone_index: the batch's index of the tables with tombstones.
    """

    created = False

    def __init__(
        self,
        spark: SparkSession,
        tables: list[GroupMember],
        batch: PipelineBatch,
        writes: WritePolicy,
        writer: TableWriter,
        tombstone_index: TombstoneIndex,
    ) -> None:
        super().__init__(spark, tables, batch, writes, writer)
        self.index = tombstone_index
        self.keys = tables[0].target.keys
        self._read_at: dict[str, int | None] = {}
        self._records: dict[str, int] = {}  # the rows of each table Spark reads
        self._counts: dict[str, ActionCounts] = {}
        self._with_tombstones: list[str] = []

    def classify(self, changes: DataFrame) -> None:
        """Type, collapse, classify against the tables and their tombstones, and count: one plan,
        one job."""
        names = [t.target.name for t in self.tables]
        typed = self._typed_changes(self._changes_of_group(changes))
        newest = self._collapsed(typed)
        on_key = F.col(TARGET) == F.col("_t_target")
        slot_of = self.layout.slot_of(names[0])  # a key has one slot in the group, its name's
        for key in self.keys:
            on_key = on_key & (F.col(slot_of[key]) == F.col(f"_t_{key}"))
        joined = newest.join(self._current_rows(newest), on_key, "left")
        self._with_tombstones = [n for n in names if self.index.holds(n)]
        if self._with_tombstones:
            deleted = (
                self.spark.table(self.tables[0].target.tombstones)
                .where(F.col("target_table").isin(*self._with_tombstones))
                .select(
                    F.col("target_table").alias("_d_target"),
                    F.col("key").alias("_d_key"),
                    F.col(ORDER_COLUMN).alias("_d_order"),
                )
            )
            on_tombstone = (F.col(TARGET) == F.col("_d_target")) & (
                F.col("_cdc_key") == F.col("_d_key")
            )
            joined = joined.join(deleted, on_tombstone, "left")
        else:
            joined = joined.withColumn("_d_order", F.lit(None).cast("binary"))
        counts = self._materialized(self._with_values(with_actions(joined, self.soft)))
        self._typed = typed
        for table in self.tables:
            name = table.target.name
            self._counts[name] = counts.get((name,), {})
            ignored = self._ignored.get(name, 0)
            self.summaries[name] = table_summary(name, self._counts[name], table.rows, ignored)

    def _current_rows(self, newest: DataFrame) -> DataFrame:
        """Each table's keys and orders, named by table, and the snapshot each is read at (in
        ``_read_at``: a table's write compares orders again only if another writer moved it on
        since). Small tables are read by the writer into one local relation: Spark plans a scan of
        each table it reads, which adds up over hundreds of tables; the others are read
        by one SQL statement of ``UNION ALL``s (one analysis for the group), kept to the keys of
        ``newest`` (the group's changes) when those are few (``few_keys``)."""
        columns = [*self.keys, ORDER_COLUMN, *([DELETED_COLUMN] if self.soft else [])]
        read: list[pa.Table] = []
        by_spark: list[TargetTable] = []
        budget = self.writes.read_rows
        for table in self.tables:
            target = table.target
            got = None
            if self.writer.rewrites_small and budget > 0:
                most = self.writes.rewritten_rows
                got = self.writer.read_columns(target.identifier, columns, most)
            if got is None:
                by_spark.append(target)
                facts = current_snapshot_facts(self.spark, target.identifier)
                self._read_at[target.name], self._records[target.name] = facts
                continue
            self._read_at[target.name], rows = got
            budget -= rows.num_rows
            read.append(_named_rows(rows, target.name, self.keys))
        keys = ", ".join(f"{quote(k)} AS {quote(f'_t_{k}')}" for k in self.keys)
        flag = f", {quote(DELETED_COLUMN)} AS _t_deleted" if self.soft else ""
        selects = [
            f"SELECT {literal(t.name)} AS _t_target, {keys}, "
            f"{ORDER_COLUMN} AS _t_order{flag} FROM {t.identifier}"
            for t in by_spark
        ]
        parts = [self.spark.sql(" UNION ALL ".join(selects))] if selects else []
        changes = sum(t.rows for t in self.tables if t.target in by_spark)
        if parts and few_changes(changes, sum(self._records[t.name] for t in by_spark)):
            parts[0] = rows_of_keys(parts[0], newest, self.keys, TARGET)
        if read:
            import pyarrow as pa

            local = arrow_frame(self.spark, pa.concat_tables(read))
            names = parts[0].columns if parts else local.columns
            parts.append(local.select(*names))
        current = parts[0]
        for part in parts[1:]:
            current = current.unionByName(part)
        return current

    @property
    def written_actions(self) -> tuple[str, ...]:
        """The actions a table's write takes: with soft deletes, a delete of a soft-deleted row
        too (its order moves on, as in ``keyed_writes.merge_target``), and a delete that writes
        its upsert's row (``soft_deletes``)."""
        soft = (DELETED_ABSENT, DELETED_WRITTEN) if self.soft else ()
        return (INSERT, UPDATE, DELETED, *soft)

    def write_tables(self) -> dict[str, Exception]:
        """The small tables rewritten whole where the writer can (committed together after the
        last rewrite), the others merged (or appended) by Spark, several at once
        (``concurrent_writes``)."""
        refusals: dict[str, Exception] = {}
        by_spark: list[GroupMember] = []
        with self.writer.rewritten_together() as moved:
            for table in self.tables:
                try:
                    if not self.write_small(table):
                        by_spark.append(table)
                except WRITE_REFUSED as exc:
                    refusals[table.target.name] = exc
        # Another writer committed to it while it was rewritten: its MERGE compares orders again.
        by_spark += [t for t in self.tables if t.target.identifier in moved]
        written = write_each(self.spark, by_spark, self.write_by_spark, _table_name, WRITE_REFUSED)
        return refusals | written

    def write_small(self, table: GroupMember) -> bool:
        """Whether one table is written without Spark: none of its changes changes a row (no
        commit), or it is small and rewritten whole by the writer, its counts on the commit.
        Otherwise ``write_by_spark`` writes it."""
        target = table.target
        summary = self.summaries[target.name]
        if not self._written(target.name):
            return True
        if not self.writer.rewrites_small or not self._collectable(table):
            return False
        note = counts_properties(self.batch, target.name, "0", self._outcome(summary))
        with stage("rewrite small table"):
            return self._rewrite(target, note)

    def _collectable(self, table: GroupMember) -> bool:
        """Whether a table may be rewritten: not one whose data files, read by Spark for its
        classification, hold more rows than a rewrite takes (its rows are then not collected)."""
        return self._records.get(table.target.name, 0) <= self.writes.rewritten_rows

    def write_by_spark(self, table: GroupMember) -> None:
        """Write one table's classified changes by a MERGE, or an append where they only add
        keys, its counts on the commit. Safe to run for several tables at once."""
        target = table.target
        summary = self.summaries[target.name]
        note = counts_properties(self.batch, target.name, "0", self._outcome(summary))
        moved = current_snapshot_id(self.spark, target.identifier) != self._read_at[target.name]
        mine = self._table_frame(target.name)
        if inserts_only(summary, target, moved):
            with commit_properties(self.spark, note), stage("append to table"):
                append_target(mine, target, self.batch)
            return
        with commit_properties(self.spark, note), stage("merge into table"):
            merged = self._written(target.name)
            records = self._records.get(target.name, 0)
            merge_target(self.spark, mine, target, moved, merged, records)

    def _rewrite(self, target: TargetTable, note: dict[str, str]) -> bool:
        """Copy-on-write by the writer: the table's rows at the snapshot the classification
        read, without the updated and deleted keys, plus the inserted and updated rows (whole
        images: a group holds no table with unsent values). With soft deletes, every written
        key's row goes (an insert may revive a soft-deleted row) and a deleted key's comes back
        flagged, with the delete's order, operation and batch (``merge_target``'s), or with the
        values of the upsert the delete carries (``soft_deletes``)."""
        import pyarrow.compute as pc

        changes = self._arrow_rows(target.name)
        action = changes.column("_action")
        gone = string_array(*self.written_actions) if self.soft else string_array(UPDATE, DELETED)
        removed = changes.filter(pc.is_in(action, value_set=gone))
        whole = (INSERT, UPDATE, DELETED_WRITTEN) if self.soft else (INSERT, UPDATE)
        added = changes.filter(pc.is_in(action, value_set=string_array(*whole)))
        marks = None
        if self.soft:
            added = with_flags(added)
            deleted = changes.filter(
                pc.is_in(action, value_set=string_array(DELETED, DELETED_ABSENT))
            )
            marked = [*target.keys, ORDER_COLUMN, "_cdc_op", "_cdc_batch_id"]
            marks = with_flag(deleted.select(marked), True)
        return self.writer.replace_rows(
            target.identifier,
            self._read_at[target.name],
            target.keys,
            removed.select(list(target.keys)),
            added,
            note,
            self.writes.rewritten_rows,
            marks,
        )

    def write_tombstones(self, applied: set[str]) -> list[str]:
        """One ``_cdc_tombstones`` commit for the ``applied`` tables' deletes (and the inserts
        that clear a tombstone); returns the tables that have tombstones now. Tables that merged
        nothing note their counts on it."""
        changing = [n for n in applied if tombstoned(self.summaries[n], self._counts[n])]
        if not changing:
            return []
        changing.sort()
        notes = [
            (n, "0", self._outcome(self.summaries[n])) for n in changing if not self._written(n)
        ]
        properties = notes_properties(self.batch, notes) if notes else {}
        mine = self._frame().where(F.col(TARGET).isin(*changing))
        first = self.tables[0].target
        with commit_properties(self.spark, properties):
            # A table without tombstones classified none as held (``_had_tombstone``).
            if any(moves_held_tombstones(self._counts[n]) for n in changing):
                count = sum(tombstoned(self.summaries[n], self._counts[n]) for n in changing)
                with stage("merge into tombstones"):
                    merge_tombstones(self.spark, mine, first, F.col(TARGET), count)
            else:
                with stage("append new tombstones"):
                    append_tombstones(mine, first.tombstones, self.batch, F.col(TARGET))
        return changing


def _table_name(table: GroupMember) -> str:
    return table.target.name
