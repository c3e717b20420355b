"""Applying one table's changes around the DDL statements of its batch, in stream order.

The changes before a table's first statement are applied with the schema the table has, then the
statement, then the next changes with the schema it left, and so on: the columns each segment
adds (or no longer carries) are those of its own row images.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest.apply.append_only import apply_append_only
from cdc_ingest.apply.commit_notes import (
    DDL_OUTCOMES_PROPERTY,
    PipelineBatch,
    ddl_note,
    with_ddl_note,
)
from cdc_ingest.apply.history import HISTORY_OF_PROPERTY, apply_history, check_history_table
from cdc_ingest.apply.keyed import apply_table
from cdc_ingest.apply.write_policy import WritePolicy
from cdc_ingest.catalog_commits import execute
from cdc_ingest.schema.ddl_parse import CREATE_TABLE, DROP_TABLE, RENAME_TABLE
from cdc_ingest.schema.design import creation
from cdc_ingest.schema.evolution import (
    APPLIED,
    REJECTED,
    SEGMENT,
    UNCHANGED,
    DdlEvent,
    plan_statement,
    segment_of,
    table_level,
)
from cdc_ingest.schema.names import RESERVED_RULE, is_reserved
from cdc_ingest.schema.ownership import TableOwner
from cdc_ingest.schema.routes import routed_creation
from cdc_ingest.schema.target import (
    KEYS_PROPERTY,
    SOURCE_DROPPED_PROPERTY,
    TargetInventory,
    TargetTable,
    prepare_target,
)
from cdc_ingest.stages import stage
from cdc_ingest.state.summary import TableSummary
from cdc_ingest.state.tables import (
    TOMBSTONES,
    TombstoneIndex,
    create_target,
    qualified,
    quote,
    sql_string,
    table_properties,
)
from cdc_ingest.table_options import PipelineTableOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_ingest.contract import ColumnType
    from cdc_ingest.formats.base import Decoder
    from cdc_ingest.schema.inference import TypeInference
    from cdc_ingest.schema_policy import SchemaPolicy
    from cdc_ingest.writers.protocol import TableWriter


@dataclass
class TableContext:
    """What applying one table needs from the batch."""

    spark: SparkSession
    catalog: str
    namespace: str
    existing: set[str]
    decoder: Decoder
    cached: DataFrame
    inference: TypeInference
    tombstone_index: TombstoneIndex
    batch_id: int
    # What creates and writes the tables (``writers``).
    writer: TableWriter
    resumed: bool = False
    table_options: PipelineTableOptions = field(default_factory=PipelineTableOptions)
    # Each file's landing time (epoch millis, by ``_cdc_file_idx``): where history versions
    # start when the format sends no source time.
    landed_ms: tuple[int | None, ...] = ()
    # The pipeline writing the tables (schema/ownership): what it records, what it may write.
    owner: TableOwner | None = None
    # What chooses each table's write route (``write_policy``).
    writes: WritePolicy = field(default_factory=WritePolicy)
    # Whether the batch applies new files (not a replay or rebuild): only then does a history
    # take its in-order keys from the mirror's classification (a rebuilt mirror starts empty
    # while its history holds every version, and a replay's keys may have left both).
    new_files: bool = True

    def policy(self, name: str) -> SchemaPolicy:
        """What each kind of schema change does to table ``name``."""
        return self.table_options.for_table(name).schema_policy

    @property
    def batch(self) -> PipelineBatch:
        """The batch, as its commits are marked and found again."""
        return PipelineBatch(self.owner.pipeline if self.owner else "", self.batch_id)


def apply_segment(
    ctx: TableContext,
    target: TargetTable,
    created: bool,
    rows: int,
    changes: DataFrame,
    index: int = 0,
) -> tuple[TableSummary, DataFrame]:
    """One segment of a table's changes (the ``index``-th around its statements; a table without
    statements has one): merged through ``keyed.apply_table``, or appended to a keyless table."""
    if target.keys:
        if target.history is not None:
            with stage("check history table"):
                check_history_table(ctx.spark, ctx.catalog, ctx.namespace, target, ctx.existing)
        part, errors, mirror = apply_table(
            ctx.spark,
            changes,
            target,
            ctx.batch,
            rows,
            created,
            part=str(index),
            resumed=ctx.resumed,
            tombstone_index=ctx.tombstone_index,
        )
        if target.history is not None:
            with stage("history"):
                part.history_changes = apply_history(
                    ctx.spark,
                    ctx.catalog,
                    ctx.namespace,
                    target,
                    changes,
                    ctx.batch,
                    str(index),
                    ctx.resumed,
                    ctx.landed_ms,
                    ctx.existing,
                    mirror if ctx.new_files else None,
                )
    else:
        part, errors = apply_append_only(ctx.spark, changes, target, ctx.batch, rows, index)
        part.append_only = True
    if target.history is not None:
        part.history_table = target.history.table
    part.created = part.created or created or target.created_in_batch
    return part, errors


def dead_letters(changes: DataFrame, reason: str, name: str) -> DataFrame:
    """``changes`` as the dead-letter frame of table ``name``, each with ``reason``."""
    return changes.select(
        "_cdc_file_idx",
        "_cdc_line",
        "row_in_message",
        F.lit(reason).alias("reason"),
        F.col("_cdc_source").alias("source_table"),
        F.lit(name).alias("target_table"),
    )


def _add(total: TableSummary, part: TableSummary) -> None:
    for f in fields(TableSummary):
        value = getattr(part, f.name)
        if isinstance(value, bool):
            setattr(total, f.name, getattr(total, f.name) or value)
        elif isinstance(value, list):
            getattr(total, f.name).extend(value)
        elif f.name == "expectations":
            for rule, counted in value.items():
                held = total.expectations.setdefault(rule, {**counted, "violations": 0})
                held["violations"] += counted["violations"]
        elif isinstance(value, int):
            setattr(total, f.name, getattr(total, f.name) + value)
        elif value is not None:
            setattr(total, f.name, value)


def _segments(changes: DataFrame, name: str) -> dict[int, tuple[int, list[str]]]:
    rows = (
        changes.where(F.col("_cdc_target") == name)
        .groupBy(SEGMENT)
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.array_distinct(F.flatten(F.collect_list(F.map_keys("image")))).alias("columns"),
        )
        .collect()
    )
    return {r[SEGMENT]: (r["rows"], list(r["columns"])) for r in rows}


def _note(
    ctx: TableContext,
    identifier: str,
    properties: dict[str, str],
    event: DdlEvent,
    status: str,
    detail: str,
) -> None:
    """Keep on the table what the statement does, before doing it (see commit_notes)."""
    note = with_ddl_note(properties, ctx.batch, event.position, status, detail)
    execute(
        ctx.spark,
        f"ALTER TABLE {identifier} SET TBLPROPERTIES "
        f"('{DDL_OUTCOMES_PROPERTY}' = {sql_string(note)})",
    )


def _table_statement(ctx: TableContext, name: str, event: DdlEvent, keys: tuple[str, ...]) -> None:
    """CREATE, RENAME or DROP TABLE."""
    identifier = qualified(ctx.catalog, ctx.namespace, name)
    [change] = [c for c in event.parsed.changes if c.action == table_level(event)]
    if event.route is not None and change.action != CREATE_TABLE:
        # One of the source tables a route sends here: the table goes on with the others'.
        shard = ".".join(event.shard or ())
        event.status = UNCHANGED
        event.detail = f"{shard} is one of the source tables routed to {name}: the table is kept"
        return
    if event.route is not None:
        change = routed_creation(change, event.route)
    if change.action == CREATE_TABLE:
        _create_table(ctx, name, identifier, event, keys or change.keys, change.columns)
    elif change.action == RENAME_TABLE and event.renamed_to:
        _rename_table(ctx, name, identifier, event, event.renamed_to)
    elif change.action == DROP_TABLE:
        if name in ctx.existing:
            position = ":".join(str(p) for p in (ctx.batch_id, *event.position))
            execute(
                ctx.spark,
                f"ALTER TABLE {identifier} SET TBLPROPERTIES "
                f"('{SOURCE_DROPPED_PROPERTY}' = '{position}')",
            )
        event.status = APPLIED
        event.detail = "source table dropped: the mirror is kept and receives no more changes"


def _create_table(
    ctx: TableContext,
    name: str,
    identifier: str,
    event: DdlEvent,
    table_key: tuple[str, ...],
    columns: dict[str, ColumnType],
) -> None:
    """CREATE TABLE: the mirror with the statement's columns, unless it exists (a source that
    re-creates a table it dropped empties it)."""
    properties = table_properties(ctx.spark, identifier) if name in ctx.existing else {}
    earlier = ddl_note(properties, ctx.batch, event.position) if ctx.resumed else None
    if earlier is not None:
        event.status, event.detail = earlier
        return
    if SOURCE_DROPPED_PROPERTY in properties:
        # The source re-created a table it dropped: the new table starts empty.
        detail = "re-created by the source: the old rows were removed, changes apply again"
        _note(ctx, identifier, properties, event, APPLIED, detail)
        execute(ctx.spark, f"DELETE FROM {identifier}")
        execute(
            ctx.spark, f"ALTER TABLE {identifier} UNSET TBLPROPERTIES ('{SOURCE_DROPPED_PROPERTY}')"
        )
        event.status, event.detail = APPLIED, detail
        return
    if name in ctx.existing:
        event.status, event.detail = UNCHANGED, "the table exists already"
        return
    detail = f"created with key {list(table_key)}"
    note = with_ddl_note({}, ctx.batch, event.position, APPLIED, detail)
    design = creation(ctx.spark, ctx.table_options.for_table(name), columns)
    created = {KEYS_PROPERTY: ",".join(table_key), DDL_OUTCOMES_PROPERTY: note}
    if ctx.owner is not None:
        created |= ctx.owner.created_properties()
    create_target(
        ctx.spark,
        identifier,
        columns,
        table_key,
        created | design.properties,
        design.extra_columns,
        design.partitioned_by,
        design.write_order,
        writer=ctx.writer.by_spark(),
    )
    ctx.existing.add(name)
    event.status, event.detail = APPLIED, detail


def _rename_table(ctx: TableContext, name: str, identifier: str, event: DdlEvent, new: str) -> None:
    """RENAME TABLE: the mirror, its history and its tombstones take the new name."""
    if ctx.resumed and name not in ctx.existing and new in ctx.existing:
        moved = table_properties(ctx.spark, qualified(ctx.catalog, ctx.namespace, new))
        earlier = ddl_note(moved, ctx.batch, event.position)
        if earlier is not None:
            event.status, event.detail = earlier
            return
    if is_reserved(new):
        event.status, event.detail = REJECTED, f"cannot rename {name} to {new}: {RESERVED_RULE}"
        return
    if name not in ctx.existing or new in ctx.existing:
        event.status = UNCHANGED
        event.detail = f"cannot rename {name} to {new}: source missing or target exists"
        return
    detail = f"renamed to {new}; later changes follow it"
    _note(ctx, identifier, table_properties(ctx.spark, identifier), event, APPLIED, detail)
    # Before the mirror: a resumed batch finds the rename noted on the new name only then.
    _rename_history(ctx, name, new)
    # The new name stays in the catalog: Spark wants it without the catalog part.
    execute(ctx.spark, f"ALTER TABLE {identifier} RENAME TO {quote(ctx.namespace)}.{quote(new)}")
    tombstones = qualified(ctx.catalog, ctx.namespace, TOMBSTONES)
    execute(
        ctx.spark, f"UPDATE {tombstones} SET target_table = '{new}' WHERE target_table = '{name}'"
    )
    ctx.tombstone_index.rename(name, new)
    ctx.existing.discard(name)
    ctx.existing.add(new)
    event.status, event.detail = APPLIED, detail


def _rename_history(ctx: TableContext, name: str, new: str) -> None:
    """A renamed mirror's history table follows it, if the new name keeps history too (and
    has no history table yet)."""
    before = ctx.table_options.for_table(name).history_of(name)
    after = ctx.table_options.for_table(new).history_of(new)
    if before is None or after is None or before.table == after.table:
        return
    old_identifier = qualified(ctx.catalog, ctx.namespace, before.table)
    new_identifier = qualified(ctx.catalog, ctx.namespace, after.table)
    if not ctx.spark.catalog.tableExists(old_identifier):
        return
    if ctx.spark.catalog.tableExists(new_identifier):
        return
    execute(
        ctx.spark,
        f"ALTER TABLE {old_identifier} RENAME TO {quote(ctx.namespace)}.{quote(after.table)}",
    )
    execute(
        ctx.spark,
        f"ALTER TABLE {new_identifier} SET TBLPROPERTIES "
        f"('{HISTORY_OF_PROPERTY}' = {sql_string(new)})",
    )
    ctx.existing.discard(before.table)
    ctx.existing.add(after.table)


def apply_with_ddl(
    ctx: TableContext,
    name: str,
    events: list[DdlEvent],
    changes: DataFrame,
    base: TargetInventory,
) -> tuple[TableSummary, list[DataFrame]]:
    """Apply a table's changes and statements in stream order; fills each event's status.

    Args:
        ctx: the batch.
        name: the target table.
        events: its DDL records, in stream order.
        changes: the batch's changes (every table's).
        base: what the whole batch says about the table (keys, type hints).

    Returns:
        The table's summary over all segments and its typing errors' frames.
    """
    segmented = changes.where(F.col("_cdc_target") == name).withColumn(SEGMENT, segment_of(events))
    segments = _segments(segmented, name) if base.columns or base.keys else {}
    total, bad = TableSummary(table=name), []
    stopped = False
    renamed: str | None = None
    for index in range(len(events) + 1):
        rows, columns = segments.get(index, (0, []))
        if rows and not stopped:
            target, created = _prepare_segment(ctx, base, columns)
            total.design_changes += target.design_changes
            if target.source_dropped:
                _add(total, TableSummary(name, messages=rows, source_dropped=rows))
                rows = 0
        if rows:
            mine = segmented.where(F.col(SEGMENT) == index).drop(SEGMENT)
        if rows and not stopped:
            part, errors = apply_segment(ctx, target, created, rows, mine, index)
            _add(total, part)
            bad.append(errors)
        elif rows:
            # In source order nothing changes a table after its RENAME: such changes are late or
            # misplaced, and are named rather than lost.
            reason = f"the change follows RENAME TABLE {name} TO {renamed} in the stream"
            _add(total, TableSummary(name, dead_lettered=rows))
            bad.append(dead_letters(mine, reason, name))
        if index == len(events):
            break
        event = events[index]
        if stopped:
            event.status, event.detail = UNCHANGED, "the table was renamed earlier in the batch"
        elif table_level(event):
            _table_statement(ctx, name, event, base.keys)
            stopped = table_level(event) == RENAME_TABLE and event.route is None
            renamed = event.renamed_to
        elif name not in ctx.existing:
            event.status, event.detail = UNCHANGED, "no such table in the mirror yet"
        else:
            _column_statement(ctx, name, event)
    return total, bad


def _prepare_segment(
    ctx: TableContext, base: TargetInventory, columns: list[str]
) -> tuple[TargetTable, bool]:
    """Create or extend the table for a segment's ``columns`` (by Spark, which applies the
    statements around it); returns it and whether this run created it."""
    inventory = TargetInventory(
        base.name,
        base.keys,
        columns,
        list(base.hints),
        unavailable=base.unavailable,
        moves_keys=base.moves_keys,
    )
    prepared = prepare_target(
        ctx.spark,
        ctx.catalog,
        ctx.namespace,
        ctx.existing,
        inventory,
        ctx.decoder,
        ctx.inference,
        ctx.policy(base.name),
        batch_id=ctx.batch_id,
        options=ctx.table_options.for_table(base.name),
        writer=ctx.writer.by_spark(),
        owner=ctx.owner,
    )
    ctx.existing.add(base.name)
    return prepared


def _column_statement(ctx: TableContext, name: str, event: DdlEvent) -> None:
    """A statement on an existing table's columns, as its schema policy plans it; noted on
    the table before it is made (a resumed batch finds the note and does not repeat it)."""
    identifier = qualified(ctx.catalog, ctx.namespace, name)
    properties = table_properties(ctx.spark, identifier)
    if SOURCE_DROPPED_PROPERTY in properties:
        event.status, event.detail = UNCHANGED, "the source dropped the table"
        return
    keys = tuple(k for k in properties.get(KEYS_PROPERTY, "").split(",") if k)
    policy = ctx.policy(name)
    status, detail, statements = plan_statement(ctx.spark, identifier, keys, event, policy)
    earlier = ddl_note(properties, ctx.batch, event.position) if ctx.resumed else None
    if statements and earlier is None:
        _note(ctx, identifier, properties, event, status, detail)
    for statement in statements:
        execute(ctx.spark, statement)
    event.status, event.detail = earlier or (status, detail)
