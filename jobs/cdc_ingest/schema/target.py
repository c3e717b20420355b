"""The columns, types and key of each target table a batch writes.

Types come, in this order, from the existing table, from what messages declare (a Connect schema),
and otherwise from Spark's JSON inference over a sample of the batch's row images. New tables are
created and new columns added before anything is merged.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc_ingest.contract import ColumnType, TypeHint
from cdc_ingest.formats.base import Decoder
from cdc_ingest.schema.design import computed_types, creation, evolve_design
from cdc_ingest.schema.inference import TypeInference
from cdc_ingest.schema.names import RESERVED_RULE, is_reserved
from cdc_ingest.schema.ownership import TableOwner
from cdc_ingest.schema.types import widens
from cdc_ingest.schema_policy import SchemaPolicy
from cdc_ingest.stages import stage
from cdc_ingest.state.order_migration import STAGED_COLUMN, migrate_stored_order, needs_migration
from cdc_ingest.state.tables import (
    ORDER_COLUMN,
    SYSTEM_COLUMNS,
    TOMBSTONES,
    add_columns,
    create_target,
    qualified,
    quote,
    sql_string,
    table_properties,
)
from cdc_ingest.table_options import DELETED_COLUMN, Expectation, HistoryOptions, TableOptions

# Every kind of schema change applied (a narrowing rejected): what ``evolve`` does.
DEFAULT_POLICY = SchemaPolicy()

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.writers.protocol import TableWriter

KEYS_PROPERTY = "cdc.keys"
# Set when the source drops the table: the mirror is kept and no longer receives changes, until
# the source creates a table of that name again.
SOURCE_DROPPED_PROPERTY = "cdc.source-dropped"
CREATED_IN_PROPERTY = "cdc.created-in-batch"


@dataclass(frozen=True)
class TargetTable:
    """A mirrored table as this batch sees it.

    Attributes:
        name: table name inside the namespace.
        identifier: quoted ``catalog.namespace.table``.
        keys: key (identifier) columns.
        columns: every source column and its type, after any additions by this batch.
        tombstones: quoted identifier of the namespace's ``_cdc_tombstones`` table.
        source_dropped: whether the source dropped the table.
    """

    name: str
    identifier: str
    keys: tuple[str, ...]
    columns: dict[str, ColumnType]
    tombstones: str
    # The source dropped the table (DROP TABLE/ERASE): the mirror is kept and receives no changes.
    source_dropped: bool = False
    # Column names of the batch the table cannot hold, with why: changes carrying them are
    # dead-lettered (see refused_columns).
    refused_columns: dict[str, str] = field(default_factory=dict)
    # Placeholders some changes carry for values not sent: those columns keep what is stored.
    unavailable_values: tuple[str, ...] = ()
    # Some updates of the batch moved a row to another key.
    moves_keys: bool = False
    # Created by this batch (by this run, or by an earlier attempt of the batch).
    created_in_batch: bool = False
    # Computed columns (``table_options``): name -> (Spark SQL expression, type).
    computed: dict[str, tuple[str, ColumnType]] = field(default_factory=dict)
    # What deletes do: apply, ignore or soft (``table_options``).
    deletes: str = "apply"
    # What this batch changed in the table's design (partition spec, write order, properties).
    design_changes: tuple[str, ...] = ()
    # Its SCD type 2 history table, if it keeps one (``table_options``' ``history``).
    history: HistoryOptions | None = None
    # Named checks of its row images (``table_options``' ``expectations``).
    expectations: tuple[Expectation, ...] = ()

    @property
    def written_columns(self) -> list[str]:
        """The columns a change writes besides the ``_cdc_`` ones: source, then computed."""
        return [*self.columns, *self.computed]


@dataclass
class TargetInventory:
    """What the batch's messages say about one target table."""

    name: str
    keys: tuple[str, ...] = ()
    columns: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    # Some changes carry placeholders for values not sent (see Decoder.unavailable_values).
    unavailable: bool = False
    # Some updates moved a row to another key (the old key is deleted).
    moves_keys: bool = False

    def add_columns(self, names: list[str]) -> None:
        """Record column names in first-seen order."""
        seen = set(self.columns)
        self.columns += [n for n in names if n not in seen and not seen.add(n)]  # type: ignore[func-returns-value]


# Encodings whose text is read the same whatever the column's type: a decimal sent as Connect
# bytes is its exact number in any decimal (or as text), a time of day its text.
PORTABLE_ENCODINGS = (
    "connect_decimal",
    "variable_decimal",
    "time_millis",
    "time_micros",
    "time_nanos",
)


def stored_type(stored: str, hinted: ColumnType | None) -> ColumnType:
    """How to read a value into a column of type ``stored`` that the message types ``hinted``:
    as hinted when the types agree, else as plain text, except for values whose encoding is
    not their column's type (Connect decimals into any decimal or string column, times of day
    into a string column), which are decoded and then must fit the stored type."""
    if hinted is None:
        return ColumnType(stored)
    if hinted.spark_type == stored:
        return hinted
    portable = hinted.encoding in PORTABLE_ENCODINGS
    if portable and (stored == "string" or stored.startswith("decimal")):
        return ColumnType(stored, hinted.encoding, hinted.scale)
    return ColumnType(stored)


def _declared(hints: list[TypeHint]) -> tuple[dict[str, ColumnType], ColumnType | None]:
    """Each column's declared type: the first hint's, or a later one that widens it (a batch
    holding an ALTER that widened a DECIMAL declares it both ways)."""
    declared: dict[str, ColumnType] = {}
    default = None
    for hint in hints:
        for name, ctype in hint.columns.items():
            first = declared.setdefault(name, ctype)
            if first.spark_type != ctype.spark_type and widens(first.spark_type, ctype.spark_type):
                declared[name] = ctype
        default = default or hint.default
    return declared, default


def _wider(stored: str, hinted: ColumnType) -> bool:
    """Whether the messages declare a wider type than the column has (a DECIMAL's precision went
    up)."""
    return hinted.spark_type != stored and widens(stored, hinted.spark_type)


def declared_widenings(
    decoder: Decoder, inventory: TargetInventory, stored: dict[str, str]
) -> dict[str, str]:
    """The columns of an existing table (``stored``: name -> type) that the batch's messages
    declare wider, with the wider type."""
    hints = [h for h in (decoder.column_types(text) for text in inventory.hints) if h is not None]
    declared, default = _declared(hints)
    widened: dict[str, str] = {}
    for name, stype in stored.items():
        hinted = declared.get(name) or default
        if hinted is not None and _wider(stype, hinted):
            widened[name] = hinted.spark_type
    return widened


def table_keys(spark: SparkSession, identifier: str) -> tuple[str, ...]:
    """The key columns a table was created with (its ``cdc.keys`` property)."""
    value = table_properties(spark, identifier).get(KEYS_PROPERTY, "")
    return tuple(k for k in value.split(",") if k)


def _created_mark(batch_id: int | None, owner: TableOwner | None) -> str:
    """The creating batch as the table remembers it: batch ids count per pipeline.

    A table created before marks named their pipeline holds the bare batch id, also accepted.
    """
    return f"{owner.pipeline}/{batch_id}" if owner is not None else str(batch_id)


def prepare_target(
    spark: SparkSession,
    catalog: str,
    namespace: str,
    existing_tables: set[str],
    inventory: TargetInventory,
    decoder: Decoder,
    inference: TypeInference,
    policy: SchemaPolicy = DEFAULT_POLICY,
    batch_id: int | None = None,
    options: TableOptions | None = None,
    *,
    writer: TableWriter,
    defer_creation: bool = False,
    owner: TableOwner | None = None,
) -> tuple[TargetTable, bool]:
    """Create or extend the target table; returns it and whether it was created.

    A table created here remembers the batch that created it (``CREATED_IN_PROPERTY``), so that
    a resumed batch still reports the tables its first attempt created.

    ``inference`` types columns nothing declares. ``policy`` says whether an existing table
    takes the columns it lacks (else their values are not applied) and the wider types the
    messages declare. ``options`` shape the table
    (see :mod:`cdc_ingest.schema.design`); ``writer`` reads and creates the table (``writers``),
    with ``defer_creation`` when its first rows are appended (or ``writer.create_pending``): the
    caller makes sure that happens before Spark needs the table.
    ``owner``: the pipeline writing it (``schema/ownership``), whose format must fit the table
    and whose ``options`` give way to those of the pipeline that created it.

    Raises:
        OrdersDoNotCompare: another order family wrote the table; nothing was changed.
    """
    options = options or TableOptions()
    identifier = qualified(catalog, namespace, inventory.name)
    hints = [h for h in (decoder.column_types(text) for text in inventory.hints) if h is not None]
    declared, default = _declared(hints)
    # Declared columns come first, in the schema's order.
    columns = [c for c in declared if c in inventory.columns or not inventory.columns]
    columns += [c for c in inventory.columns if c not in columns]
    columns += [k for k in inventory.keys if k not in columns]
    existing: dict[str, str] = {}
    stored: dict[str, str] = {}  # every column of an existing table, the job's included
    created = inventory.name not in existing_tables
    properties: dict[str, str] = {}
    if not created:
        stored, properties = writer.table_facts(identifier)
        if owner is not None:
            owner.check(inventory.name, properties)
            options = owner.options(inventory.name, properties, options)
        if needs_migration(stored):
            migrate_stored_order(spark, identifier, stored)
            writer.altered(identifier)
            stored = {n: t for n, t in stored.items() if n != STAGED_COLUMN}
            stored[ORDER_COLUMN] = "binary"
    computed_names = set(options.computed_columns)
    columns = [c for c in columns if c not in computed_names]
    if not created:
        existing = {
            n: t
            for n, t in stored.items()
            if n not in SYSTEM_COLUMNS and n != DELETED_COLUMN and n not in computed_names
        }
    refused = refused_columns([*existing, *columns], decoder.own_columns | decoder.routed_columns)
    columns = [c for c in columns if c not in refused]
    types: dict[str, ColumnType] = {}
    widened: dict[str, str] = {}
    for name, stype in existing.items():
        hinted = declared.get(name) or default
        if policy.widens_columns and hinted is not None and _wider(stype, hinted):
            # The messages declare a wider type (e.g. a DECIMAL's precision went up).
            widened[name] = hinted.spark_type
            stype = hinted.spark_type
        types[name] = stored_type(stype, hinted)
    new = [c for c in columns if c not in existing and (policy.adds_columns or created)]
    for name in new:
        if options.type_mapping == "to-string" or name in decoder.routed_columns:
            types[name] = stored_type("string", declared.get(name))
        elif name in declared:
            types[name] = declared[name]
        elif default is not None:
            types[name] = default
    undeclared = {c for c in new if c not in types}
    if undeclared:
        with stage("infer types"):
            inferred = inference.types(inventory.name, undeclared)
        for name in new:
            if name in undeclared:
                types[name] = inferred.get(name, ColumnType("string"))
    keys = inventory.keys
    computed: dict[str, ColumnType] = {}
    new_computed: dict[str, str] = {}
    if created:
        ordered = {c: types[c] for c in columns}
        design = creation(spark, options, ordered)
        computed = design.computed
        created_with = {KEYS_PROPERTY: ",".join(keys), **design.properties}
        if owner is not None:
            created_with |= owner.created_properties()
        if batch_id is not None:
            created_with[CREATED_IN_PROPERTY] = _created_mark(batch_id, owner)
        with stage("create table"):
            won = create_target(
                spark,
                identifier,
                ordered,
                keys,
                created_with,
                design.extra_columns,
                design.partitioned_by,
                design.write_order,
                writer=writer,
                deferred=defer_creation,
            )
        if not won:
            # Another writer created it since the run started: extend it like any existing table.
            existing_tables = {*existing_tables, inventory.name}
            return prepare_target(
                spark,
                catalog,
                namespace,
                existing_tables,
                inventory,
                decoder,
                inference,
                policy,
                batch_id,
                options,
                writer=writer,
                owner=owner,
            )
    if not created:
        keys = tuple(k for k in properties.get(KEYS_PROPERTY, "").split(",") if k) or keys
    design_changes: list[str] = []
    if not created:
        computed = {n: ColumnType(stored[n]) for n in computed_names if n in stored}
        new_computed = {n: e for n, e in options.computed_columns.items() if n not in stored}
        computed |= computed_types(spark, types, new_computed)
    if not created and SOURCE_DROPPED_PROPERTY not in properties:
        add_columns(spark, identifier, {c: types[c] for c in new})
        for name, wider in widened.items():
            spark.sql(f"ALTER TABLE {identifier} ALTER COLUMN {quote(name)} TYPE {wider}")
        added = {n: computed[n] for n in new_computed}
        add_columns(spark, identifier, added)
        design_changes += [f"computed column {n} added" for n in added]
        now = stored | {c: types[c].spark_type for c in new} | widened
        now |= {n: c.spark_type for n, c in added.items()}
        design_changes += evolve_design(spark, identifier, options, properties, now)
        claimed = owner.claim(properties) if owner is not None else {}
        if claimed:
            assigned = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in claimed.items())
            spark.sql(f"ALTER TABLE {identifier} SET TBLPROPERTIES ({assigned})")
        if new or widened or added or design_changes or claimed:
            writer.altered(identifier)  # its facts' load is older than these changes
    target = TargetTable(
        name=inventory.name,
        identifier=identifier,
        keys=keys,
        columns=types,
        tombstones=qualified(catalog, namespace, TOMBSTONES),
        source_dropped=SOURCE_DROPPED_PROPERTY in properties,
        refused_columns=refused,
        unavailable_values=decoder.unavailable_values if inventory.unavailable else (),
        moves_keys=inventory.moves_keys,
        created_in_batch=created
        or properties.get(CREATED_IN_PROPERTY) in (_created_mark(batch_id, owner), str(batch_id)),
        computed={n: (options.computed_columns[n], computed[n]) for n in options.computed_columns},
        deletes=options.deletes,
        design_changes=tuple(design_changes),
        history=options.history_of(inventory.name),
        expectations=tuple(options.expectations.values()),
    )
    return target, created


def refused_columns(names: list[str], own: Collection[str] = ()) -> dict[str, str]:
    """Column names a table cannot hold, each with the dead letter's reason.

    Spark and Iceberg here compare column names without case: ``id`` and ``ID`` cannot both be
    columns, so changes carrying the later spelling are dead-lettered; a column needs a name; and
    a source column named like the job's own columns (``RESERVED_PREFIX``) would be one of them,
    unless the format adds it itself (``own``: ``Decoder.own_columns``).
    """
    first: dict[str, str] = {}
    refused: dict[str, str] = {}
    for name in names:
        if is_reserved(name) and name not in own:
            refused[name] = (
                f"column '{name}': {RESERVED_RULE} (the columns it adds to every mirror): "
                "the change is not applied"
            )
            continue
        if not name.strip():
            refused[name] = (
                f"column name {name!r} is empty or blank, which a table cannot hold: "
                "the change is not applied"
            )
            continue
        kept = first.setdefault(name.lower(), name)
        if kept != name:
            refused[name] = (
                f"column '{name}' differs from column '{kept}' only in case (column names are "
                "compared without case): the change is not applied"
            )
    return refused
