"""Run modes: what a run does, chosen once from its options and the pipeline's pending batch.

A :class:`RunMode` has two parts. Its **batch kind** says which files the batch applies and how
their changes are prepared: an ordinary batch (the new files), a replay or a rebuild. Its
**effect** says what the run writes: everything (a batch of the checkpoint), only some tables
(``tables``: the files stay pending; no checkpoint, dead letters or DDL history), or nothing (a
dry run: not even the system tables of a new namespace).

- A **replay** (``replay_from``/``replay_to``, and every Airflow backfill run) re-applies the
  committed files whose landing time (see ``landed_time``) is in ``[from, to)``. It changes rows
  only where a table lacks what those files say: every change keeps the landing position of its
  first application (batch, file index), so a change is never newer than itself and never beats a
  later change with an equal ordering value. It creates no table, executes no DDL (the tables'
  schemas already are what the stream made them; columns they lack are left out, as under
  ``schema_changes: ignore``), re-appends to an append-only table only the rows it no longer holds
  (matched by ``_cdc_order``, which holds the first application's position), writes only dead
  letters not yet recorded for the same file, line and row, and writes no DDL history.
- A **rebuild** (``rebuild_tables``) drops the listed tables (and their tombstones) and applies
  every committed file that is still landed to them, DDL at its stream position included, in one
  batch: the same tables as the original ingestion.

Both are batches of the checkpoint like any other: planned first (the planned rows carry what the
batch is and each file's original position), sealed by a commit whose file rows have status
``replayed``; a run killed in between is resumed as the same replay or rebuild (a rebuild drops
its tables again and starts over).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from cdc_ingest.catalog_commits import execute
from cdc_ingest.run.options import RunRefused
from cdc_ingest.run.replays import (
    NOT_CREATED,
    ReplayRefused,
    plan_replay,
    replay_request,
    with_original_positions,
    without_appended_rows,
)
from cdc_ingest.state.tables import TOMBSTONES, qualified, quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdc_ingest.changes.inventory import Inventory
    from cdc_ingest.config import Config
    from cdc_ingest.run.context import RunContext
    from cdc_ingest.run.options import RunOptions
    from cdc_ingest.schema.evolution import DdlEvent
    from cdc_ingest.state.checkpoints import BatchPlan
    from cdc_ingest.state.lake import CheckpointState
    from cdc_ingest.state.summary import RunSummary


class NewFiles:
    """An ordinary batch: the landed files not applied yet (or the pending plan, resumed)."""

    name: ClassVar[str] = "new files"
    #: Whether the batch's statements go to the DDL history (a replay's or rebuild's are there).
    records_ddl: ClassVar[bool] = True
    #: Whether only dead letters not recorded yet for the same file, line and row are written.
    only_new_dead_letters: ClassVar[bool] = False
    #: Whether planned files are hashed again when read (they were listed by an earlier run).
    rehashes: ClassVar[bool] = False

    def plan(self, run: RunContext) -> BatchPlan:
        """The batch's files."""
        return run.store.plan(run.listing, run.state, run.options.max_files)

    def prepare(self, run: RunContext, resolved: DataFrame, plan: BatchPlan) -> DataFrame:
        """The decoded changes as the batch applies them."""
        return resolved

    def config(self, config: Config) -> Config:
        """The pipelines file the batch applies with."""
        return config

    def tables(self) -> tuple[str, ...]:
        """The only tables the batch applies (empty: every table it changes)."""
        return ()

    def restrict(self, inventory: Inventory, existing: set[str], summary: RunSummary) -> None:
        """Leave out of the inventory the tables this kind of batch must not touch."""

    def statements(self, events: list[DdlEvent]) -> list[DdlEvent]:
        """The statements the batch executes."""
        return events

    def before_apply(self, run: RunContext) -> None:
        """What a writing run does before it changes any table."""


class Replay(NewFiles):
    """The committed files landed in a range, applied again (see the module's docstring)."""

    name = "replay"
    records_ddl = False
    only_new_dead_letters = True
    rehashes = True

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request

    def plan(self, run: RunContext) -> BatchPlan:
        if run.state.pending_batch_id is not None:
            return run.store.plan(run.listing, run.state)
        landed, rebuild = run.options.landed, run.options.rebuild_tables
        return plan_replay(
            run.spark, run.pipeline, run.catalog, run.state, run.listing, landed, rebuild
        )

    def prepare(self, run: RunContext, resolved: DataFrame, plan: BatchPlan) -> DataFrame:
        resolved = with_original_positions(resolved, plan)
        return without_appended_rows(run.spark, resolved, run.catalog, run.namespace, run.existing)

    def config(self, config: Config) -> Config:
        # A replay evolves nothing: columns a table lacks are left out.
        pipelines = tuple(p.ignoring_schema_changes() for p in config.pipelines)
        return dataclasses.replace(config, pipelines=pipelines)

    def restrict(self, inventory: Inventory, existing: set[str], summary: RunSummary) -> None:
        for name in sorted(inventory.tables):
            if name not in existing:
                del inventory.tables[name]
                summary.skipped_tables[name] = NOT_CREATED
                summary.skipped_table_messages += inventory.rows.get(name, 0)

    def statements(self, events: list[DdlEvent]) -> list[DdlEvent]:
        return []


class Rebuild(Replay):
    """Some tables dropped and applied again from every committed file still landed."""

    name = "rebuild"

    def prepare(self, run: RunContext, resolved: DataFrame, plan: BatchPlan) -> DataFrame:
        return with_original_positions(resolved, plan)

    def config(self, config: Config) -> Config:
        return config

    def tables(self) -> tuple[str, ...]:
        return tuple(self.request["tables"])

    def restrict(self, inventory: Inventory, existing: set[str], summary: RunSummary) -> None:
        """A rebuild applies its tables only (see :meth:`tables`); it may create them."""

    def statements(self, events: list[DdlEvent]) -> list[DdlEvent]:
        tables = set(self.tables())
        return [e for e in events if e.target in tables]

    def before_apply(self, run: RunContext) -> None:
        """Drop the tables a rebuild re-creates, and their tombstones (again, when resumed)."""
        tables = self.tables()
        for name in tables:
            execute(
                run.spark, f"DROP TABLE IF EXISTS {qualified(run.catalog, run.namespace, name)}"
            )
            run.existing.discard(name)
        names = ", ".join("'" + n.replace("'", "''") + "'" for n in tables)
        execute(
            run.spark,
            f"DELETE FROM {qualified(run.catalog, run.namespace, TOMBSTONES)} "
            f"WHERE {quote('target_table')} IN ({names})",
        )


@dataclass(frozen=True)
class Effect:
    """What a run writes.

    Attributes:
        name: ``full``, ``tables`` or ``dry run``.
        writes_tables: creates, alters and changes tables (and the namespace's system tables).
        commits: the batch is planned first and committed last in ``_cdc_checkpoints``; its dead
            letters and DDL history are written.
        records_batch: writes the run's row of ``_cdc_batches``.
    """

    name: str
    writes_tables: bool
    commits: bool
    records_batch: bool


FULL = Effect("full", writes_tables=True, commits=True, records_batch=True)
TABLES_ONLY = Effect("tables", writes_tables=True, commits=False, records_batch=True)
DRY_RUN = Effect("dry run", writes_tables=False, commits=False, records_batch=False)


@dataclass(frozen=True)
class RunMode:
    """What one run does: its batch kind, its effect, and the tables it is restricted to."""

    kind: NewFiles
    effect: Effect
    #: The tables a ``tables`` run applies (it applies no append-only table: appends cannot be
    #: repeated safely by the full run that follows).
    only_tables: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """``full``, ``dry run``, ``tables``, ``replay`` or ``rebuild`` (with `` (dry run)``)."""
        if self.kind.name == NewFiles.name:
            return self.effect.name
        return self.kind.name + (" (dry run)" if self.effect is DRY_RUN else "")

    @property
    def restricted_to(self) -> tuple[str, ...]:
        """The only tables the run applies (empty: every table the batch changes)."""
        return self.only_tables or self.kind.tables()

    @property
    def appends(self) -> bool:
        """Whether append-only (keyless) tables are applied."""
        return not self.only_tables

    @property
    def records_dead_letters(self) -> bool:
        """Whether the batch's dead letters are written."""
        return self.effect.commits

    @property
    def records_ddl(self) -> bool:
        """Whether the batch's statements are written to the DDL history."""
        return self.effect.commits and self.kind.records_ddl


def choose_mode(options: RunOptions, state: CheckpointState) -> RunMode:
    """The run's mode, from its options and the pipeline's pending batch.

    A pending batch is finished first: a pending replay or rebuild is resumed as what it was; a
    replay or rebuild asked for while another batch is pending is refused, and so is a ``tables``
    run.

    Raises:
        ReplayRefused: a replay or rebuild asked for while another batch is pending.
        RunRefused: ``tables`` given while a batch is pending.
    """
    effect = DRY_RUN if options.dry_run else TABLES_ONLY if options.tables else FULL
    pending = state.pending_batch_id
    if options.tables and pending is not None:
        raise RunRefused(
            f"batch {pending} was planned and not committed: run without tables to finish it first"
        )
    if options.landed is not None or options.rebuild_tables:
        asked = replay_request(options.landed, options.rebuild_tables)
        if pending is not None:
            held = state.pending_replay or {}
            if {k: held.get(k) for k in asked} != asked:
                raise ReplayRefused(
                    f"batch {pending} was planned and not committed: run without "
                    "replay_from/replay_to/rebuild_tables to finish it first"
                )
        return RunMode(_replay_kind(asked), effect)
    if state.pending_replay is not None:
        return RunMode(_replay_kind(state.pending_replay), effect)
    return RunMode(NewFiles(), effect, tuple(sorted(set(options.tables))))


def _replay_kind(request: dict[str, Any]) -> Replay:
    return Rebuild(request) if request["mode"] == Rebuild.name else Replay(request)
