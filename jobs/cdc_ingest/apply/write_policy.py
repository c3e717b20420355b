"""What chooses each table's write route in a batch: alone, or in a group of tables classified
together (created by the batch, or holding rows); its rows appended or rewritten without a Spark
job (``writers``), or written by Spark. One frozen policy per run, which tests pass in
(``run_pipeline(writes=...)``) to take a route at the sizes of a test; the measurements behind
the defaults are in docs/performance.md ("Figures behind the code's choices")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cdc_ingest.schema.target import TargetTable
    from cdc_ingest.writers.protocol import TableWriter

# Where a prepared table is applied: with the other tables the batch creates, with the other
# tables that hold rows, or alone by a plan of its own.
Route = Literal["fresh group", "existing group", "alone"]


@dataclass(frozen=True)
class WritePolicy:
    """The sizes and switches behind the routes."""

    # A table with this many changes or more is applied on its own: its own jobs then cost less
    # than carrying and sorting its rows with a table name.
    group_rows: int = 100_000
    # Rows collected to the driver at once for pyiceberg's appends: bounded so that a group of
    # many fairly large tables never holds all of its rows in the driver's memory.
    chunk_rows: int = 200_000
    # A table of at most this many rows is rewritten whole through pyiceberg, which costs less
    # than the job, tasks and row-level planning any MERGE pays, however small: larger ones are
    # merged.
    rewritten_rows: int = 100_000
    # The rows of a group's tables read into the driver for their classification, at most (the
    # rest of the group's tables are read by Spark).
    read_rows: int = 1_000_000
    # pyiceberg creates, appends and rewrites what it can, mirrors and bookkeeping alike (off: as
    # in a catalog pyiceberg does not write). Off for the mirrors with lineage: Spark's
    # OpenLineage listener reports each write Spark makes, and pyiceberg's are not Spark jobs.
    pyiceberg: bool = True

    def fits_a_group(self, target: TargetTable, rows: int) -> bool:
        """Whether a prepared table can share a group's plan: keyed, fewer than ``group_rows``
        changes, and nothing that needs a plan of its own (moved keys, unsent values, refused
        columns, a dropped source). A group's tables all delete alike and compute the same
        columns (``groups.layout_groups``)."""
        return (
            rows < self.group_rows
            and bool(target.keys)
            and not target.source_dropped
            and not target.refused_columns
            and not target.unavailable_values
            and not target.moves_keys
        )

    def route(
        self,
        target: TargetTable,
        created: bool,
        rows: int,
        tombstoned: bool,
        resumed: bool,
        fanned_out: bool = False,
    ) -> Route:
        """Where a prepared table (``created`` by the batch, holding ``tombstoned`` keys of an
        earlier table of its name) with ``rows`` changes is applied. A table that keeps history
        is applied alone (its history follows its commit), as is one with expectations (its
        checks see its columns by their own names) and one that deletes naming no table aim at
        (``fanned_out``); a resumed batch applies each table that held rows alone, taking its
        counts from its first attempt (``keyed.apply_table``)."""
        own_plan = fanned_out or target.history is not None or bool(target.expectations)
        if own_plan or not self.fits_a_group(target, rows):
            return "alone"
        if created:
            return "alone" if tombstoned else "fresh group"
        return "alone" if resumed else "existing group"

    def mirrors_writer(self, writer: TableWriter) -> TableWriter:
        """What writes the mirrors: the run's writer, or Spark's alone where ``pyiceberg`` is
        off."""
        return writer if self.pyiceberg else writer.by_spark()

    def keeps_group(self, writer: TableWriter, target: TargetTable, created: bool) -> bool:
        """Whether a table alone in its group is still classified as a group, for its writer to
        write it without a Spark job: a group of one shares no plan, but a created table's
        collected rows are appended, and a small table's rewritten, for much less than a Spark
        append or MERGE costs (performance.md, "Figures behind the code's choices")."""
        if created:
            return writer.appends_collected
        return writer.rewrites_small and writer.rewritable(target.identifier, self.rewritten_rows)
