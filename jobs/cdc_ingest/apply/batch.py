"""Apply one batch to every target table it changes: the prepare-and-apply loop of a run.

Per table: plain changes go through :mod:`cdc_ingest.apply.keyed` (keyed, MERGE) or
:mod:`cdc_ingest.apply.append_only` (keyless); a table with statements in the batch goes through
:mod:`cdc_ingest.apply.segmented`, which applies it in segments around each statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

from cdc_ingest.apply.append_only import apply_append_only
from cdc_ingest.apply.commit_notes import BATCH_PROPERTY
from cdc_ingest.apply.existing_tables import (
    ExistingGroup,
    applies_existing,
    existing_groups,
    write_group,
)
from cdc_ingest.apply.fresh_tables import FreshGroup, FreshTable, applies_fresh, fresh_groups
from cdc_ingest.apply.keyed import apply_table
from cdc_ingest.apply.segmented import TableContext, apply_with_ddl
from cdc_ingest.apply.update_images import pair_before_halves
from cdc_ingest.contract import DELETE, UPSERT
from cdc_ingest.schema.evolution import EVOLVE, ignored_rows
from cdc_ingest.schema.inference import TypeInference
from cdc_ingest.schema.target import TargetInventory, TargetTable, prepare_target, table_keys
from cdc_ingest.stages import stage
from cdc_ingest.state.summary import TableSummary
from cdc_ingest.state.tables import TOMBSTONES, TombstoneIndex, qualified
from cdc_ingest.table_options import TableDesignError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.changes.inventory import Batch, Inventory
    from cdc_ingest.config import Config
    from cdc_ingest.formats.base import Decoder
    from cdc_ingest.schema.evolution import DdlEvent
    from cdc_ingest.state.arrow_catalog import ArrowCatalog
    from cdc_ingest.state.summary import RunSummary


def _fan_out_tableless_deletes(spark: SparkSession, batch: Batch, inventory: Inventory) -> set[str]:
    """Aim deletes that name no table at every table keyed like them; returns those tables.

    An Aerospike delete carries no set, but its digest identifies the record in the whole
    namespace: deleting it from every table keyed by the digest deletes exactly that record.
    """
    keys = inventory.tableless_keys
    tables = {n for n, inv in inventory.tables.items() if inv.keys == keys}
    for name in sorted(batch.existing - set(inventory.tables)):
        if name.startswith("_cdc_"):
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
    arrow: ArrowCatalog | None = None,
) -> list[DataFrame]:
    """Prepare every target table and apply its changes and statements; returns typing errors.

    ``arrow`` (pyiceberg's view of the catalog, ``state/arrow_catalog``) creates and appends the
    small tables the batch creates without a JVM call or Spark job each.

    A run restricted to some tables (``only``) applies those of them that the batch changes (and,
    without ``appends``, that have a key), and says in ``summary.skipped_tables`` why it skipped
    the others.
    Tables with DDL in the batch come first, in stream order: a renamed table must be renamed
    before the rows that already carry its new name are applied.
    """
    pipeline = config.pipeline(pipeline_name)
    evolve = pipeline.schema_changes == EVOLVE
    is_change = F.col("_cdc_error").isNull() & F.col("_cdc_kind").isin(UPSERT, DELETE)
    dead: list[DataFrame] = []
    changes = batch.cached.where(is_change)
    fan_out: set[str] = set()
    if inventory.tableless_deletes:
        fan_out = _fan_out_tableless_deletes(spark, batch, inventory)
        summary.deletes_without_table_tables = sorted(fan_out)
    for name in sorted(set(only) - set(inventory.tables)):
        summary.skipped_tables[name] = "no changes in these files"
    by_table: dict[str, list[DdlEvent]] = {}
    for event in events if evolve else []:
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
        summary.resumed,
        pipeline.tables,
        arrow,
    )
    ordered = sorted(by_table, key=lambda n: by_table[n][0].position)
    ordered += sorted(n for n in inventory.tables if n not in by_table)
    fresh: list[FreshTable] = []
    holding: list[FreshTable] = []  # tables with rows, classified in groups (existing_tables)
    for name in ordered:
        base = inventory.tables.get(name) or TargetInventory(name)
        if only and name not in only:
            summary.skipped_table_messages += inventory.rows.get(name, 0)
            continue
        if not appends and not _keyed(spark, batch, base):
            summary.skipped_tables[name] = "append-only: only a full run appends its rows"
            summary.skipped_table_messages += inventory.rows.get(name, 0)
            continue
        rows = inventory.rows.get(name, 0)
        mine = changes
        if name in inventory.before_halves:
            mine = pair_before_halves(batch.cached, changes, name)
            base.moves_keys = True
        try:
            if name in by_table:
                table_summary, errors = apply_with_ddl(ctx, name, by_table[name], mine, base)
                dead += errors
            else:
                target, created = _prepare(ctx, base, evolve, deferred=True)
                tombstoned = ctx.tombstone_index.holds(name)
                together = applies_fresh(target, created, tombstoned, rows)
                if together and name not in fan_out:
                    fresh.append(FreshTable(target, rows))  # applied below, with the others
                    continue
                if ctx.arrow is not None:
                    ctx.arrow.create_pending(target.identifier)  # Spark applies it
                # A resumed batch takes each table's counts from its first attempt (apply_table).
                shares = applies_existing(target, created, rows) and not ctx.resumed
                if shares and name not in fan_out:
                    holding.append(FreshTable(target, rows))
                    continue
                table_summary, bad = _apply_plain(ctx, target, created, rows, mine, name in fan_out)
                if bad is not None:
                    dead.append(bad)
                if not evolve:
                    summary.ignored_values += ignored_rows(spark, changes, name, target.identifier)
        except (AnalysisException, TableDesignError) as exc:
            table_summary, refused = _refuse_table(ctx, changes, name, rows, exc)
            dead.append(refused)
            for event in by_table.get(name, []):
                event.status, event.detail = "failed", f"table {name} {_why(exc)}"
        _account(summary, table_summary)
    groups = [(g, False) for g in existing_groups(holding)]
    groups += [(g, True) for g in fresh_groups(fresh)]
    for members, created in groups:
        dead += _apply_group(ctx, members, created, changes, summary, evolve)
    if arrow is not None:
        arrow.create_pending()  # none should be left; the batch never ends with one missing
    return dead


def _account(summary: RunSummary, table_summary: TableSummary) -> None:
    if table_summary.messages or table_summary.created or table_summary.dead_lettered:
        summary.tables[table_summary.table] = table_summary
    summary.messages -= table_summary.dead_lettered
    summary.dead_lettered += table_summary.dead_lettered


def _apply_group(
    ctx: TableContext,
    members: list[FreshTable],
    created: bool,
    changes: DataFrame,
    summary: RunSummary,
    evolve: bool,
) -> list[DataFrame]:
    """Tables classified together (``created`` by this run, or holding rows), then each
    written by a commit of its own (a created table's rows through pyiceberg where ``ctx.arrow``
    can take them), its failure its own; one tombstones commit for the group."""
    spark = ctx.spark
    # A group of one shares no plan; a created table's rows still go through pyiceberg, whose
    # append costs a tenth of a Spark job's (what a small batch into a new table mostly pays).
    arrow = ctx.arrow
    if len(members) == 1 and not (created and arrow is not None and arrow.available):
        return _apply_alone(ctx, members[0], created, changes, summary, evolve)
    group = (
        FreshGroup(spark, members, ctx.batch_id)
        if created
        else ExistingGroup(spark, members, ctx.batch_id, ctx.tombstone_index, arrow)
    )
    dead: list[DataFrame] = []
    try:
        group.classify(changes)
    except AnalysisException:
        # Not one table's fault as far as can be told: each table alone, as any other.
        for table in members:
            if arrow is not None:
                arrow.create_pending(table.target.identifier)
            dead += _apply_alone(ctx, table, created, changes, summary, evolve)
        return dead
    refusals = write_group(ctx.spark, group, members, arrow)
    applied: set[str] = set()
    for table in members:
        target = table.target
        refusal = refusals.get(target.name)
        if refusal is None:
            try:
                if not evolve:
                    summary.ignored_values += ignored_rows(
                        spark, changes, target.name, target.identifier
                    )
            except (AnalysisException, TableDesignError) as exc:
                refusal = exc
        if refusal is None:
            table_summary = group.summaries[target.name]
            table_summary.design_changes += target.design_changes
            applied.add(target.name)
        else:
            table_summary, refused = _refuse_table(ctx, changes, target.name, table.rows, refusal)
            dead.append(refused)
        _account(summary, table_summary)
    for name in group.write_tombstones(applied):
        ctx.tombstone_index.add(name)
    errors = group.errors(applied)
    if errors is not None:
        dead.append(errors)
    return dead


def _apply_alone(
    ctx: TableContext,
    table: FreshTable,
    created: bool,
    changes: DataFrame,
    summary: RunSummary,
    evolve: bool,
) -> list[DataFrame]:
    target = table.target
    try:
        table_summary, bad = _apply_plain(ctx, target, created, table.rows, changes, False)
        letters = [bad] if bad is not None else []
        if not evolve:
            summary.ignored_values += ignored_rows(
                ctx.spark, changes, target.name, target.identifier
            )
    except (AnalysisException, TableDesignError) as exc:
        table_summary, refused = _refuse_table(ctx, changes, target.name, table.rows, exc)
        letters = [refused]
    _account(summary, table_summary)
    return letters


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _why(exc: Exception) -> str:
    return f"could not be applied: {_first_line(exc)}"


def _committed_in_batch(ctx: TableContext, name: str) -> bool:
    """Whether a commit of this batch already changed the table (then it is not refused whole)."""
    identifier = qualified(ctx.catalog, ctx.namespace, name)
    if name not in ctx.existing and not ctx.spark.catalog.tableExists(identifier):
        return False
    mine = ctx.spark.sql(f"SELECT summary FROM {identifier}.snapshots").where(
        F.col("summary").getItem(BATCH_PROPERTY) == str(ctx.batch_id)
    )
    return bool(mine.limit(1).count())


def _refuse_table(
    ctx: TableContext, changes: DataFrame, name: str, rows: int, exc: Exception
) -> tuple[TableSummary, DataFrame]:
    """Every change aimed at a table, as dead letters with one reason: the table's own fault (a
    mirror altered by hand, a name or type Spark refuses, table options that do not fit its
    columns), as long as none of its changes were committed; the other tables of the batch flow.
    Raises ``exc`` again when a commit of the batch changed the table already.
    """
    if ctx.arrow is not None:
        # A table whose creation waited for its rows is made now, empty, as a refused table
        # always was (and so that the check below finds it).
        ctx.arrow.create_pending(qualified(ctx.catalog, ctx.namespace, name))
    if _committed_in_batch(ctx, name):
        raise exc
    reason = f"table {name} {_why(exc)}"
    letters = changes.where(F.col("_cdc_target") == name).select(
        "_cdc_file_idx",
        "_cdc_line",
        "row_in_message",
        F.lit(reason).alias("reason"),
        F.col("_cdc_source").alias("source_table"),
        F.lit(name).alias("target_table"),
    )
    return TableSummary(name, dead_lettered=rows), letters


def _prepare(
    ctx: TableContext, base: TargetInventory, evolve: bool, deferred: bool = False
) -> tuple[TargetTable, bool]:
    """Create or extend a table without statements in the batch; returns it and whether this
    run created it. ``deferred``: pyiceberg may create it with its first rows, when its group
    writes them (``ArrowCatalog.create_keyed``); the caller has it created before Spark needs
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
            evolve,
            ctx.batch_id,
            ctx.table_options.for_table(base.name),
            ctx.arrow,
            deferred,
        )
    ctx.existing.add(base.name)
    return target, created


def _apply_plain(
    ctx: TableContext,
    target: TargetTable,
    created: bool,
    rows: int,
    changes: DataFrame,
    fan_out: bool,
) -> tuple[TableSummary, DataFrame | None]:
    """One prepared table without statements in the batch: one segment (none if its source was
    dropped)."""
    if target.source_dropped:
        return TableSummary(target.name, messages=rows, source_dropped=rows), None
    mine = changes
    if fan_out:
        mine = changes.withColumn("_cdc_target", F.coalesce("_cdc_target", F.lit(target.name)))
    if target.keys:
        table_summary, bad = apply_table(
            ctx.spark,
            mine,
            target,
            ctx.batch_id,
            rows,
            created,
            resumed=ctx.resumed,
            tombstone_index=ctx.tombstone_index,
        )
    else:
        table_summary, bad = apply_append_only(ctx.spark, mine, target, ctx.batch_id, rows)
        table_summary.append_only = True
    table_summary.created = table_summary.created or created or target.created_in_batch
    table_summary.design_changes += target.design_changes
    return table_summary, bad


def _keyed(spark: SparkSession, batch: Batch, inventory: TargetInventory) -> bool:
    """Whether a target table has a key (else it is append-only), without creating it."""
    if inventory.keys:
        return True
    if inventory.name not in batch.existing:
        return False
    return bool(table_keys(spark, qualified(batch.catalog, batch.namespace, inventory.name)))
