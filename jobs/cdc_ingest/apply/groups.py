"""Tables applied together: one typing, collapse, classification and count for many tables.

Done one table at a time, a batch of hundreds of tables (a topic that carries a whole database)
pays a typed plan, a collapse shuffle and a counting job per table. Here tables share one plan,
one shuffle and one count, their rows at most ``GROUP_COLUMNS`` slots wide, each slot holding
columns of one type of several tables (``group_layout``). Each table is still written by a commit
of its own, carrying its counts (``commit_notes``), so that a failure stays with its table and a
resumed batch reports what the first attempt did. A group of at most ``chunk_rows`` changes is
collected as Arrow by the job that classifies it and counted in the driver, for a writer that
writes collected rows (``writers``). A group of tables the batch creates (``fresh_tables``) and
one of tables that hold rows (``existing_tables``) differ only in what their changes are
classified against and how each table is written.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from cdc_ingest import sql_text
from cdc_ingest.apply.classify import ActionCounts, action_counts, arrow_action_counts
from cdc_ingest.apply.collapse import newest_changes
from cdc_ingest.apply.commit_notes import (
    PipelineBatch,
)
from cdc_ingest.apply.group_layout import GroupLayout, group_layout
from cdc_ingest.apply.outcomes import outcome, written_rows
from cdc_ingest.apply.typed_changes import (
    TypedColumn,
    computed_columns,
    is_type_map,
    raw_value,
    typed_select,
    typed_values,
    types_by_type,
)
from cdc_ingest.arrow_frames import arrow_frame, collect_arrow, string_array
from cdc_ingest.contract import DELETE
from cdc_ingest.sql_text import literal
from cdc_ingest.stages import stage
from cdc_ingest.state.tables import ORDER_COLUMN
from cdc_ingest.table_options import TableDesignError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.apply.write_policy import WritePolicy
    from cdc_ingest.contract import ColumnType
    from cdc_ingest.schema.target import TargetTable
    from cdc_ingest.state.summary import TableSummary
    from cdc_ingest.writers.protocol import TableWriter

# The slots of a group's typed rows, at most (``group_layout``): wide rows cost more than the plans
# they save.
GROUP_COLUMNS = 64
TARGET = "_cdc_target"


@dataclass(frozen=True)
class GroupMember:
    """A table applied with others, and how many of the batch's changes are aimed at it."""

    target: TargetTable
    rows: int


def layout_groups(tables: list[GroupMember]) -> list[list[GroupMember]]:
    """The tables in groups that delete alike (applied, soft or ignored deletes) and compute the
    same columns (``table_options``' ``computed_columns``; tables computing some have the same
    columns, which the computed ones are written over), each group's rows at most
    ``GROUP_COLUMNS`` slots wide (``group_layout``; first fit, in the given order; a table wider
    than that is a group of its own)."""
    groups: list[tuple[GroupLayout, list[GroupMember]]] = []
    for table in tables:
        target = table.target
        for at, (layout, members) in enumerate(groups):
            first = members[0].target
            agrees = (first.deletes, first.computed) == (target.deletes, target.computed)
            agrees = agrees and (not target.computed or first.columns == target.columns)
            placed = layout.placed(target, GROUP_COLUMNS) if agrees else None
            if placed is not None:
                groups[at] = (placed, [*members, table])
                break
        else:
            groups.append((GroupLayout().placed(target) or GroupLayout(), [table]))
    return [members for _, members in groups]


class TableGroup:
    """Tables classified together, each then written on its own (``fresh_tables.CreatedGroup``,
    ``existing_tables.HoldingGroup``).

    Args:
        spark: the session.
        tables: the group (see ``layout_groups``).
        batch: the batch.
        writes: the run's write policy (``write_policy``).
        writer: what writes the tables (``writers``).
    """

    # Whether the group's tables are created by this run (they hold no rows), or hold rows.
    created: bool

    def __init__(
        self,
        spark: SparkSession,
        tables: list[GroupMember],
        batch: PipelineBatch,
        writes: WritePolicy,
        writer: TableWriter,
    ) -> None:
        self.spark, self.tables, self.batch, self.writes = spark, tables, batch, writes
        self.writer = writer
        self.soft = tables[0].target.deletes == "soft"
        self.ignores_deletes = tables[0].target.deletes == "ignore"
        self._ignored: dict[str, int] = {}  # each table's ignored deletes (``_collapsed``)
        self.layout = group_layout([t.target for t in tables]) or GroupLayout()
        self.columns: dict[str, ColumnType] = self.layout.slots
        self.summaries: dict[str, TableSummary] = {}
        self._typed: DataFrame | None = None
        self._typed_columns: list[TypedColumn] = []
        self._classified: DataFrame | None = None
        self._frame_lock = threading.Lock()
        self._rows: pa.Table | None = None  # the whole classification, if collected
        self._collected: dict[str, pa.Table] = {}  # collected, not yet written

    def _collapsed(self, typed: DataFrame) -> DataFrame:
        """Each key's newest change of every table (``newest_changes``). Where the group ignores
        deletes, they are left out before (an ignored delete supersedes nothing) and counted per
        table, those whose values fit their types (the others are dead letters), in one job."""
        if self.ignores_deletes:
            is_delete = f"_cdc_kind = {literal(DELETE)}"
            with stage("count ignored deletes"):
                counted = sql_text.aggregate(
                    typed.where(f"{is_delete} AND _type_error IS NULL"),
                    [TARGET],
                    ["count(1) AS ignored"],
                ).collect()
            self._ignored = {r[TARGET]: r["ignored"] for r in counted}
            typed = typed.where(f"NOT ({is_delete})")
        # The columns and the type maps that hold columns (``typed_values``).
        carried = [c for c in typed.columns if c in self.columns or is_type_map(c)]
        carry = carried if self.soft else None
        return newest_changes(typed, per=(TARGET, "_cdc_key"), typing_errors=True, carry=carry)

    def _materialized(self, classified: DataFrame) -> dict[tuple[object, ...], ActionCounts]:
        """Materialize the classification (its lineage cut: recomputed after a write, it would
        classify against the new state) and count it per table. A group of at most
        ``chunk_rows`` changes is collected as Arrow by the job that classifies it and counted in
        the driver: for a small batch, the local checkpoint, the counting job and the collecting
        job were most of its apply stage. A larger one is kept in a local checkpoint, counted by
        a job and collected in chunks for pyiceberg's writes."""
        with stage("type, collapse, classify"):
            if sum(t.rows for t in self.tables) <= self.writes.chunk_rows:
                self._rows = collect_arrow(classified)
                return arrow_action_counts(self._rows, TARGET)
            self._classified = classified.localCheckpoint(eager=False)
            return action_counts(self._classified, TARGET)

    def _frame(self) -> DataFrame:
        """The classification as a Spark frame (the collected rows as a local relation)."""
        with self._frame_lock:  # tables' writes may ask at once (``concurrent_writes``)
            if self._classified is None:
                assert self._rows is not None, "classify first"
                self._classified = arrow_frame(self.spark, self._rows)
            return self._classified

    def _changes_of_group(self, changes: DataFrame) -> DataFrame:
        """The changes to the group's tables; with the names of the slots several columns share
        (``group_layout``), joined from a local relation of one row per table."""
        names = [t.target.name for t in self.tables]
        columns, rows = self.layout.names_rows(names)
        if len(columns) == 1:
            chosen = ", ".join(literal(name) for name in names)
            return changes.where(f"{TARGET} IN ({chosen})")
        schema = ", ".join(f"{sql_text.name(c)} STRING" for c in columns)
        return changes.join(F.broadcast(self.spark.createDataFrame(rows, schema)), TARGET)

    def _table_frame(self, name: str) -> DataFrame:
        """One table's classified changes, its columns by their names (``group_layout``)."""
        slot_of = self.layout.slot_of(name)
        slots = set(self.columns)
        own = [F.col(sql_text.name(slot)).alias(c) for c, slot in slot_of.items()]
        rest = [F.col(sql_text.name(c)) for c in self._frame().columns if c not in slots]
        return self._frame().where(F.col(TARGET) == name).select(*own, *rest)

    def _typed_changes(self, changes: DataFrame) -> DataFrame:
        columns: list[TypedColumn] = []
        keys = {t.target.name: t.target.keys for t in self.tables}
        for slot, ctype in self.columns.items():
            sources = self.layout.sources(slot)
            keyed = [t for t, column in sources.items() if column in keys[t]]
            by: bool | str = len(keyed) == len(self.tables)
            if keyed and not by:
                by = f"{TARGET} IN ({', '.join(literal(k) for k in keyed)})"
            named_by = self.layout.name_column(slot)
            names = tuple(dict.fromkeys(sources.values())) if by is False else ()
            columns.append(TypedColumn(slot, raw_value(slot, by, named_by), ctype, named_by, names))
        rows = sum(t.rows for t in self.tables)
        by_type = types_by_type(len(columns), rows)
        self._typed_columns = columns
        return typed_select(changes, columns, leading=[TARGET], by_type=by_type)

    def _with_values(self, classified: DataFrame) -> DataFrame:
        """The classified changes with every column's value (``typed_values``) and the computed
        columns: every table of the group computes the same ones (``layout_groups``), each from
        its own typed source columns (``typed_changes.computed_columns``)."""
        valued = typed_values(classified, self._typed_columns)
        return computed_columns(valued, self.tables[0].target)

    def _arrow_rows(self, name: str) -> pa.Table:
        """The table's rows of the ``written_actions`` as Arrow (with ``_action``): from the
        collected classification, or collected with those of the tables after it (in the group's
        order, up to ``writes.chunk_rows`` rows) in one job."""
        if name not in self._collected:
            self._collected = (
                self._written_of_all() if self._rows is not None else self._collect_written(name)
            )
        return self._collected.pop(name)

    def _written_of_all(self) -> dict[str, pa.Table]:
        import pyarrow.compute as pc

        assert self._rows is not None
        action = self._rows.column("_action")
        written = self._rows.filter(pc.is_in(action, value_set=string_array(*self.written_actions)))
        computed = list(self.tables[0].target.computed)
        return self._by_table(written.select([*self.columns, *computed, *WRITE_COLUMNS, TARGET]))

    def _collect_written(self, first: str) -> dict[str, pa.Table]:
        classified = self._frame()
        names = [t.target.name for t in self.tables]
        chunk: list[GroupMember] = []
        rows = 0
        for table in self.tables[names.index(first) :]:
            written = self._written(table.target.name)
            if chunk and rows + written > self.writes.chunk_rows:
                break
            if written and self._collectable(table):
                chunk.append(table)
                rows += written
        slots = [s for t in chunk for s in self.layout.slot_of(t.target.name).values()]
        columns = list(dict.fromkeys([*slots, *self.tables[0].target.computed]))
        chosen = ", ".join(literal(t.target.name) for t in chunk)
        actions = ", ".join(literal(action) for action in self.written_actions)
        inserts = sql_text.select(
            classified.where(f"{TARGET} IN ({chosen}) AND _action IN ({actions})"),
            [*(sql_text.name(column) for column in columns), *WRITE_COLUMNS, TARGET],
        )
        with stage("collect rows of grouped tables"):
            return self._by_table(collect_arrow(inserts))

    def _by_table(self, rows: pa.Table) -> dict[str, pa.Table]:
        """``rows`` split by their table, each with its written columns by their names (in its
        order) and ``WRITE_COLUMNS``."""
        computed = list(self.tables[0].target.computed)
        parts: dict[str, pa.Table] = {}
        for name, part in _split_by_table(rows).items():
            slot_of = self.layout.slot_of(name)
            own = [*slot_of.values(), *computed, *WRITE_COLUMNS]
            parts[name] = part.select(own).rename_columns([*slot_of, *computed, *WRITE_COLUMNS])
        return parts

    def errors(self, applied: set[str]) -> DataFrame | None:
        """The typing errors (dead letters) of the ``applied`` tables' changes, if they have any
        (a table refused whole has all its changes dead-lettered already)."""
        assert self._typed is not None, "classify first"
        mine = sorted(n for n, s in self.summaries.items() if n in applied and s.dead_lettered)
        if not mine:
            return None
        failed = F.col("_type_error").isNotNull() & F.col(TARGET).isin(*mine)
        return self._typed.where(failed).select(
            "_cdc_file_idx",
            "_cdc_line",
            "row_in_message",
            F.col("_type_error").alias("reason"),
            F.col("_cdc_source").alias("source_table"),
            F.col(TARGET).alias("target_table"),
        )

    def classify(self, changes: DataFrame) -> None:
        """Type, collapse, classify and count every table's changes: one plan, one job."""
        raise NotImplementedError

    def write_tables(self) -> dict[str, Exception]:
        """Write each table of the classified group, each by a commit of its own; returns the
        refusals, each its table's own."""
        raise NotImplementedError

    @property
    def written_actions(self) -> tuple[str, ...]:
        """The actions whose rows a table's write takes (``_arrow_rows``)."""
        raise NotImplementedError

    def _written(self, name: str) -> int:
        return written_rows(self.summaries[name], self.soft, self.created)

    def _outcome(self, summary: TableSummary) -> dict[str, object]:
        return outcome(summary, self.created)

    def _collectable(self, table: GroupMember) -> bool:
        """Whether a table's written rows may be written from the driver (collected as Arrow)."""
        return True


# What refuses one table's write, its own fault (its refusal goes with it, the group's other tables
# are written).
WRITE_REFUSED = (AnalysisException, TableDesignError)
# The columns a table's write takes besides its own (``_action`` tells rewrites what each row is).
WRITE_COLUMNS = (ORDER_COLUMN, "_cdc_op", "_cdc_batch_id", "_action")


def _split_by_table(rows: pa.Table) -> dict[str, pa.Table]:
    """``rows`` split by their ``TARGET`` (dropped)."""
    import pyarrow.compute as pc

    rows = rows.sort_by(TARGET)
    parts: dict[str, pa.Table] = {}
    offset = 0
    for counted in pc.value_counts(rows.column(TARGET)).to_pylist():
        size = counted["counts"]
        parts[counted["values"]] = rows.slice(offset, size).drop_columns([TARGET])
        offset += size
    return parts
