"""Apply one batch to every target table it changes: the prepare-and-apply loop of a run.

Tables with statements in the batch first, one after another in stream order, each in segments
around its statements (:mod:`cdc_ingest.apply.segmented`); then the tables that need a plan of
their own, several at once (:mod:`cdc_ingest.apply.alone_tables`: keyed through
:mod:`cdc_ingest.apply.keyed`, keyless through :mod:`cdc_ingest.apply.append_only`); then the
others in groups classified together (:mod:`cdc_ingest.apply.groups`: the tables it creates
in :mod:`cdc_ingest.apply.fresh_tables`, those holding rows in
:mod:`cdc_ingest.apply.existing_tables`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from cdc_ingest.apply.alone_tables import (
    REFUSED,
    AloneTable,
    account,
    apply_alone_tables,
    refuse_table,
    why,
)
from cdc_ingest.apply.existing_tables import HoldingGroup, existing_groups
from cdc_ingest.apply.fresh_tables import CreatedGroup
from cdc_ingest.apply.groups import GroupMember, layout_groups
from cdc_ingest.apply.segmented import TableContext, apply_with_ddl
from cdc_ingest.apply.update_images import pair_before_halves
from cdc_ingest.apply.write_policy import WritePolicy
from cdc_ingest.contract import DELETE, UPSERT
from cdc_ingest.schema.evolution import REFUSED as STATEMENT_REFUSED
from cdc_ingest.schema.evolution import PolicyDecision, SchemaChangeHeld, ignored_rows
from cdc_ingest.schema.inference import TypeInference
from cdc_ingest.schema.names import RESERVED_RULE, is_reserved
from cdc_ingest.schema.ownership import OrdersDoNotCompare, TableOwner
from cdc_ingest.schema.target import TargetInventory, TargetTable, prepare_target, table_keys
from cdc_ingest.stages import stage
from cdc_ingest.state.tables import TOMBSTONES, TombstoneIndex, qualified
from cdc_ingest.table_options import TableDesignError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.changes.inventory import Batch, Inventory
    from cdc_ingest.config import Config, PipelineConfig
    from cdc_ingest.formats.base import Decoder
    from cdc_ingest.schema.evolution import DdlEvent
    from cdc_ingest.state.summary import RunSummary
    from cdc_ingest.writers.protocol import TableWriter


def _fan_out_tableless_deletes(spark: SparkSession, batch: Batch, inventory: Inventory) -> set[str]:
    """Aim deletes that name no table at every table keyed like them; returns those tables.

    An Aerospike delete carries no set, but its digest identifies the record in the whole
    namespace: deleting it from every table keyed by the digest deletes exactly that record.
    """
    keys = inventory.tableless_keys
    tables = {n for n, inv in inventory.tables.items() if inv.keys == keys}
    for name in sorted(batch.existing - set(inventory.tables)):
        if is_reserved(name):
            continue
        identifier = qualified(batch.catalog, batch.namespace, name)
        if table_keys(spark, identifier) == keys:
            tables.add(name)
            inventory.tables[name] = TargetInventory(name, keys)
            inventory.rows[name] = 0
    for name in tables:
        inventory.rows[name] += inventory.tableless_deletes
    return tables


def apply_all_tables(
    spark: SparkSession,
    config: Config,
    pipeline_name: str,
    decoder: Decoder,
    batch: Batch,
    inventory: Inventory,
    summary: RunSummary,
    events: list[DdlEvent],
    only: tuple[str, ...] = (),
    appends: bool = True,
    *,
    writer: TableWriter,
    decision: PolicyDecision | None = None,
    writes: WritePolicy | None = None,
) -> list[DataFrame]:
    """Prepare every target table and apply its changes and statements; returns typing errors.

    ``writer`` creates the tables and writes their rows (``writers``); ``writes`` chooses each
    table's route (``write_policy``).

    A run restricted to some tables (``only``) applies those of them that the batch changes (and,
    without ``appends``, that have a key), and says in ``summary.skipped_tables`` why it skipped
    the others. ``decision``: the tables the schema policies hold or leave uncreated
    (``evolution.check_policy``); statements it marked already are not applied.
    Tables with DDL in the batch come first, in stream order: a renamed table must be renamed
    before the rows that already carry its new name are applied.
    """
    pipeline = config.pipeline(pipeline_name)
    decision = decision or PolicyDecision()
    writes = writes or WritePolicy()
    is_change = F.col("_cdc_error").isNull() & F.col("_cdc_kind").isin(UPSERT, DELETE)
    changes = batch.cached.where(is_change)
    fan_out: set[str] = set()
    if inventory.tableless_deletes:
        fan_out = _fan_out_tableless_deletes(spark, batch, inventory)
        summary.deletes_without_table_tables = sorted(fan_out)
    for name in sorted(set(only) - set(inventory.tables)):
        summary.skipped_tables[name] = "no changes in these files"
    by_table: dict[str, list[DdlEvent]] = {}
    for event in events:
        if not event.status:
            by_table.setdefault(event.target, []).append(event)
    ctx = TableContext(
        spark,
        batch.catalog,
        batch.namespace,
        batch.existing,
        decoder,
        batch.cached,
        TypeInference(spark, batch.cached, batch.resolved, decoder, inventory.sampled),
        TombstoneIndex(spark, qualified(batch.catalog, batch.namespace, TOMBSTONES)),
        batch.batch_id,
        writer,
        summary.resumed,
        pipeline.tables,
        batch.landed_ms,
        _owner(config, pipeline),
        writes,
        new_files=summary.replay is None,
    )
    ordered = sorted(by_table, key=lambda n: by_table[n][0].stream_key)
    ordered += sorted(n for n in inventory.tables if n not in by_table)
    tables = _BatchTables(ctx, changes, summary, by_table, fan_out)
    for name in ordered:
        base = inventory.tables.get(name) or TargetInventory(name)
        rows = inventory.rows.get(name, 0)
        if only and name not in only:
            summary.skipped_table_messages += rows
            continue
        if tables.set_aside(name, rows, decision):
            continue
        if not appends and not _keyed(spark, batch, base):
            summary.skipped_tables[name] = "append-only: only a full run appends its rows"
            summary.skipped_table_messages += rows
            continue
        mine = changes
        if name in inventory.before_halves:
            mine = pair_before_halves(batch.cached, changes, name)
            base.moves_keys = True
        tables.take(base, rows, mine)
    return tables.apply_routed()


@dataclass
class _BatchTables:
    """The batch's tables as the loop of ``apply_all_tables`` takes them: each refused, set
    aside, applied with its statements, or routed (``WritePolicy.route``) to a group or a plan
    of its own, applied once every table is routed."""

    ctx: TableContext
    changes: DataFrame
    summary: RunSummary
    by_table: dict[str, list[DdlEvent]]
    fan_out: set[str]
    dead: list[DataFrame] = field(default_factory=list)
    fresh: list[GroupMember] = field(default_factory=list)
    # Tables with rows, classified in groups (existing_tables).
    holding: list[GroupMember] = field(default_factory=list)
    # Applied each by a plan of its own, several at once.
    alone: list[AloneTable] = field(default_factory=list)

    def set_aside(self, name: str, rows: int, decision: PolicyDecision) -> bool:
        """Whether the table is left out of the batch: a name no mirror may take, its schema
        change held by its policy, or its creation left to later."""
        # Its changes never reach a table of that name (one of the job's, or a history).
        refusal: Exception | None = _refused_name(self.ctx, name)
        if refusal is None and name in decision.held:
            # Nothing of the table changes: its changes wait, its statements were marked.
            refusal = SchemaChangeHeld(decision.held[name])
        if refusal is not None:
            statements_marked = isinstance(refusal, SchemaChangeHeld)
            self._refuse(name, rows, refusal, True, mark_statements=not statements_marked)
            return True
        if name in decision.not_created:
            self.summary.skipped_tables[name] = decision.not_created[name]
            self.summary.skipped_table_messages += rows
            return True
        return False

    def take(self, base: TargetInventory, rows: int, mine: DataFrame) -> None:
        """Apply a table with statements in the batch now; prepare any other and route it."""
        ctx, name = self.ctx, base.name
        try:
            if name in self.by_table:
                table_summary, errors = apply_with_ddl(ctx, name, self.by_table[name], mine, base)
                self.dead += errors
                account(self.summary, table_summary)
                return
            target, created = _prepare(ctx, base, deferred=True)
            tombstoned = ctx.tombstone_index.holds(name)
            fanned_out = name in self.fan_out
            route = ctx.writes.route(target, created, rows, tombstoned, ctx.resumed, fanned_out)
            if route == "fresh group":
                self.fresh.append(GroupMember(target, rows))  # applied with the others
                return
            ctx.writer.create_pending(target.identifier)  # Spark applies it
            if route == "existing group":
                self.holding.append(GroupMember(target, rows))
            else:
                self.alone.append(AloneTable(target, created, rows, mine, fanned_out))
        except REFUSED as exc:
            # Refused as it was prepared, before this batch changed it.
            self._refuse(name, rows, exc, isinstance(exc, OrdersDoNotCompare))

    def _refuse(
        self,
        name: str,
        rows: int,
        exc: Exception,
        never_applied: bool,
        mark_statements: bool = True,
    ) -> None:
        """The table's changes as dead letters (``refuse_table``), its statements refused unless
        marked already (a held table's, by ``check_policy``)."""
        table_summary, refused = refuse_table(
            self.ctx, self.changes, name, rows, exc, never_applied
        )
        self.dead.append(refused)
        if mark_statements:
            for event in self.by_table.get(name, []):
                event.status, event.detail = STATEMENT_REFUSED, f"table {name} {why(exc)}"
        account(self.summary, table_summary)

    def apply_routed(self) -> list[DataFrame]:
        """Apply the routed tables: those alone several at once, then the groups; returns the
        batch's typing errors."""
        ctx, changes, summary = self.ctx, self.changes, self.summary
        dead = self.dead + apply_alone_tables(ctx, self.alone, changes, summary)
        groups = [(g, False) for g in existing_groups(self.holding)]
        groups += [(g, True) for g in layout_groups(self.fresh)]
        for members, created in groups:
            dead += _apply_group(ctx, members, created, changes, summary)
        ctx.writer.create_pending()  # none should be left; the batch never ends with one missing
        return dead


def _owner(config: Config, pipeline: PipelineConfig) -> TableOwner:
    """The pipeline as the writer of its tables, beside the file's others of its namespace."""
    designs = {
        p.name: p.tables
        for p in config.pipelines
        if p.namespace.lower() == pipeline.namespace.lower()
    }
    return TableOwner(pipeline.name, pipeline.format, designs)


def _refused_name(ctx: TableContext, name: str) -> TableDesignError | None:
    """Why no mirror may take this name, or None: one of the job's, or another's history."""
    if is_reserved(name):
        return ReservedTableName()
    owner = ctx.table_options.history_owner(name)
    return HistoryNameTaken(owner) if owner is not None else None


class ReservedTableName(TableDesignError):
    """A source table named like the job's own tables (``_cdc_checkpoints``...)."""

    def __init__(self) -> None:
        super().__init__(
            f"it is named like the job's own tables ({RESERVED_RULE}): give the pipeline a table "
            "template that names it otherwise, or leave it out with exclude_tables"
        )


class HistoryNameTaken(TableDesignError):
    """A source table named like another table's history table (``history_table``)."""

    def __init__(self, owner: str) -> None:
        super().__init__(
            f"it is where table {owner} keeps its history (history_table): name that history "
            "otherwise, or rename the source table"
        )


def _apply_group(
    ctx: TableContext,
    members: list[GroupMember],
    created: bool,
    changes: DataFrame,
    summary: RunSummary,
) -> list[DataFrame]:
    """Tables classified together (``created`` by this run, or holding rows), then each
    written by a commit of its own (a created table's collected rows where ``ctx.writer`` can
    take them), its failure its own; one tombstones commit for the group."""
    spark = ctx.spark
    writer = ctx.writer
    if len(members) == 1 and not ctx.writes.keeps_group(writer, members[0].target, created):
        return _apply_alone(ctx, members[0], created, changes, summary)
    group = (
        CreatedGroup(spark, members, ctx.batch, ctx.writes, writer)
        if created
        else HoldingGroup(spark, members, ctx.batch, ctx.writes, writer, ctx.tombstone_index)
    )
    dead: list[DataFrame] = []
    try:
        group.classify(changes)
    except AnalysisException:
        # Not one table's fault as far as can be told: each table alone, as any other.
        for table in members:
            writer.create_pending(table.target.identifier)
            dead += _apply_alone(ctx, table, created, changes, summary)
        return dead
    refusals = group.write_tables()
    applied: set[str] = set()
    for table in members:
        target = table.target
        refusal = refusals.get(target.name)
        if refusal is None:
            try:
                if not ctx.policy(target.name).adds_columns:
                    summary.ignored_values += ignored_rows(
                        spark, changes, target.name, target.identifier
                    )
            except REFUSED as exc:
                refusal = exc
        if refusal is None:
            table_summary = group.summaries[target.name]
            table_summary.design_changes += target.design_changes
            applied.add(target.name)
        else:
            table_summary, refused = refuse_table(ctx, changes, target.name, table.rows, refusal)
            dead.append(refused)
        account(summary, table_summary)
    for name in group.write_tombstones(applied):
        ctx.tombstone_index.add(name)
    errors = group.errors(applied)
    if errors is not None:
        dead.append(errors)
    return dead


def _apply_alone(
    ctx: TableContext,
    table: GroupMember,
    created: bool,
    changes: DataFrame,
    summary: RunSummary,
) -> list[DataFrame]:
    alone = AloneTable(table.target, created, table.rows, changes)
    return apply_alone_tables(ctx, [alone], changes, summary)


def _prepare(
    ctx: TableContext, base: TargetInventory, deferred: bool = False
) -> tuple[TargetTable, bool]:
    """Create or extend a table without statements in the batch; returns it and whether this
    run created it. ``deferred``: the writer may create it with its first rows, when its group
    writes them (``TableWriter.create_keyed``); the caller has it created before Spark needs
    it."""
    with stage("prepare target"):
        target, created = prepare_target(
            ctx.spark,
            ctx.catalog,
            ctx.namespace,
            ctx.existing,
            base,
            ctx.decoder,
            ctx.inference,
            ctx.policy(base.name),
            ctx.batch_id,
            ctx.table_options.for_table(base.name),
            writer=ctx.writer,
            defer_creation=deferred,
            owner=ctx.owner,
        )
    ctx.existing.add(base.name)
    return target, created


def _keyed(spark: SparkSession, batch: Batch, inventory: TargetInventory) -> bool:
    """Whether a target table has a key (else it is append-only), without creating it."""
    if inventory.keys:
        return True
    if inventory.name not in batch.existing:
        return False
    return bool(table_keys(spark, qualified(batch.catalog, batch.namespace, inventory.name)))
