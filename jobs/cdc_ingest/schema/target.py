"""The columns, types and key of each target table a batch writes.

Types come, in this order, from the existing table, from what messages declare (a Connect schema),
and otherwise from Spark's JSON inference over a sample of the batch's row images. New tables are
created and new columns added before anything is merged.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc_ingest.catalog_commits import execute
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
    created = inventory.name not in existing_tables
    preparation = _Preparation(
        spark, catalog, namespace, inventory, decoder, inference, policy, batch_id, writer, owner
    )
    options = options or TableOptions()
    target = preparation.target(options, created, defer_creation)
    if target is None:
        # Another writer created it since the run started: extend it like any existing table.
        target = preparation.target(options, created=False)
        assert target is not None  # an existing table is extended, never created
        return target, False
    return target, created


@dataclass(frozen=True)
class _Columns:
    """A table's columns as this batch has them: the types of those it keeps (``types``), the
    existing ones it widens, the new ones it adds, the ones it refuses."""

    ordered: list[str]
    types: dict[str, ColumnType]
    widened: dict[str, str]
    new: list[str]
    refused: dict[str, str]


@dataclass(frozen=True)
class _Preparation:
    """What ``prepare_target`` prepares a table with (see there)."""

    spark: SparkSession
    catalog: str
    namespace: str
    inventory: TargetInventory
    decoder: Decoder
    inference: TypeInference
    policy: SchemaPolicy
    batch_id: int | None
    writer: TableWriter
    owner: TableOwner | None

    def target(
        self, options: TableOptions, created: bool, defer_creation: bool = False
    ) -> TargetTable | None:
        """The table, created (None: another writer created it first) or extended."""
        spark, inventory, owner = self.spark, self.inventory, self.owner
        identifier = qualified(self.catalog, self.namespace, inventory.name)
        stored: dict[str, str] = {}  # every column of an existing table, the job's included
        properties: dict[str, str] = {}
        if not created:
            stored, properties, options = _stored_facts(
                spark, self.writer, identifier, inventory.name, options, owner
            )
        columns = self._columns(stored, options, created)
        types = columns.types
        keys = inventory.keys
        design_changes: list[str] = []
        if created:
            ordered = {c: types[c] for c in columns.ordered}
            creator = _Creation(
                spark, self.writer, identifier, owner, self.batch_id, defer_creation
            )
            won, computed = creator.create(options, ordered, keys)
            if not won:
                return None
        else:
            keys = tuple(k for k in properties.get(KEYS_PROPERTY, "").split(",") if k) or keys
            computed_names = set(options.computed_columns)
            computed = {n: ColumnType(stored[n]) for n in computed_names if n in stored}
            new_computed = {n: e for n, e in options.computed_columns.items() if n not in stored}
            computed |= computed_types(spark, types, new_computed)
            if SOURCE_DROPPED_PROPERTY not in properties:
                added = {c: types[c] for c in columns.new}
                changed = (added, columns.widened, {n: computed[n] for n in new_computed})
                facts = (stored, properties, options)
                design_changes = _extended(spark, self.writer, identifier, facts, owner, *changed)
        mark = _created_mark(self.batch_id, owner)
        return TargetTable(
            name=inventory.name,
            identifier=identifier,
            keys=keys,
            columns=types,
            tombstones=qualified(self.catalog, self.namespace, TOMBSTONES),
            source_dropped=SOURCE_DROPPED_PROPERTY in properties,
            refused_columns=columns.refused,
            unavailable_values=self.decoder.unavailable_values if inventory.unavailable else (),
            moves_keys=inventory.moves_keys,
            created_in_batch=created
            or properties.get(CREATED_IN_PROPERTY) in (mark, str(self.batch_id)),
            computed={n: (e, computed[n]) for n, e in options.computed_columns.items()},
            deletes=options.deletes,
            design_changes=tuple(design_changes),
            history=options.history_of(inventory.name),
            expectations=tuple(options.expectations.values()),
        )

    def _columns(self, stored: dict[str, str], options: TableOptions, created: bool) -> _Columns:
        """The table's columns: declared ones first, in the schema's order, then the others the
        messages carry, then the key's; typed as declared, by the options, or inferred."""
        inventory, decoder = self.inventory, self.decoder
        hints = [decoder.column_types(text) for text in inventory.hints]
        declared, default = _declared([h for h in hints if h is not None])
        columns = [c for c in declared if c in inventory.columns or not inventory.columns]
        columns += [c for c in inventory.columns if c not in columns]
        columns += [k for k in inventory.keys if k not in columns]
        computed_names = set(options.computed_columns)
        columns = [c for c in columns if c not in computed_names]
        existing = {
            n: t
            for n, t in stored.items()
            if n not in SYSTEM_COLUMNS and n != DELETED_COLUMN and n not in computed_names
        }
        own = decoder.own_columns | decoder.routed_columns
        refused = refused_columns([*existing, *columns], own)
        columns = [c for c in columns if c not in refused]
        new = [c for c in columns if c not in existing and (self.policy.adds_columns or created)]
        typing = _ColumnTyping(declared, default, decoder, options)
        types, widened = typing.existing(existing, self.policy)
        types |= typing.new(new, inventory.name, self.inference)
        return _Columns(columns, types, widened, new, refused)


@dataclass(frozen=True)
class _Creation:
    """How this run creates a table: by ``writer`` (``defer_creation``: with its first rows),
    marked with its pipeline (``owner``) and creating batch."""

    spark: SparkSession
    writer: TableWriter
    identifier: str
    owner: TableOwner | None
    batch_id: int | None
    defer_creation: bool

    def create(
        self, options: TableOptions, columns: dict[str, ColumnType], keys: tuple[str, ...]
    ) -> tuple[bool, dict[str, ColumnType]]:
        """Create the table as its options design it; returns whether this run created it
        (False: another writer did first) and its computed columns' types."""
        design = creation(self.spark, options, columns)
        created_with = {KEYS_PROPERTY: ",".join(keys), **design.properties}
        if self.owner is not None:
            created_with |= self.owner.created_properties()
        if self.batch_id is not None:
            created_with[CREATED_IN_PROPERTY] = _created_mark(self.batch_id, self.owner)
        with stage("create table"):
            won = create_target(
                self.spark,
                self.identifier,
                columns,
                keys,
                created_with,
                design.extra_columns,
                design.partitioned_by,
                design.write_order,
                writer=self.writer,
                deferred=self.defer_creation,
            )
        return won, design.computed


def _stored_facts(
    spark: SparkSession,
    writer: TableWriter,
    identifier: str,
    name: str,
    options: TableOptions,
    owner: TableOwner | None,
) -> tuple[dict[str, str], dict[str, str], TableOptions]:
    """An existing table's columns and properties, checked against the pipeline writing it,
    whose options give way to its creator's (``owner``); a stored order still a list is migrated
    first (``order_migration``).

    Raises:
        OrdersDoNotCompare: another order family wrote the table; nothing was changed.
    """
    stored, properties = writer.table_facts(identifier)
    if owner is not None:
        owner.check(name, properties)
        options = owner.options(name, properties, options)
    if needs_migration(stored):
        migrate_stored_order(spark, identifier, stored)
        stored = {n: t for n, t in stored.items() if n != STAGED_COLUMN}
        stored[ORDER_COLUMN] = "binary"
    return stored, properties, options


@dataclass(frozen=True)
class _ColumnTyping:
    """The types a table's columns take: the messages' declared types (``declared``, or the
    format's ``default``), the options' type mapping, or inferred."""

    declared: dict[str, ColumnType]
    default: ColumnType | None
    decoder: Decoder
    options: TableOptions

    def existing(
        self, stored: dict[str, str], policy: SchemaPolicy
    ) -> tuple[dict[str, ColumnType], dict[str, str]]:
        """The existing columns' types, and those the policy widens to what the messages declare
        (e.g. a DECIMAL's precision went up)."""
        types: dict[str, ColumnType] = {}
        widened: dict[str, str] = {}
        for name, stype in stored.items():
            hinted = self.declared.get(name) or self.default
            if policy.widens_columns and hinted is not None and _wider(stype, hinted):
                widened[name] = hinted.spark_type
                stype = hinted.spark_type
            types[name] = stored_type(stype, hinted)
        return types, widened

    def new(
        self, columns: list[str], table: str, inference: TypeInference
    ) -> dict[str, ColumnType]:
        """New columns' types; those nothing declares inferred from the batch's values."""
        types: dict[str, ColumnType] = {}
        for name in columns:
            if self.options.type_mapping == "to-string" or name in self.decoder.routed_columns:
                types[name] = stored_type("string", self.declared.get(name))
            elif name in self.declared:
                types[name] = self.declared[name]
            elif self.default is not None:
                types[name] = self.default
        undeclared = {c for c in columns if c not in types}
        if undeclared:
            with stage("infer types"):
                inferred = inference.types(table, undeclared)
            for name in columns:
                if name in undeclared:
                    types[name] = inferred.get(name, ColumnType("string"))
        return types


def _extended(
    spark: SparkSession,
    writer: TableWriter,
    identifier: str,
    facts: tuple[dict[str, str], dict[str, str], TableOptions],
    owner: TableOwner | None,
    added: dict[str, ColumnType],
    widened: dict[str, str],
    computed: dict[str, ColumnType],
) -> list[str]:
    """Extend an existing table (its stored columns, properties and options: ``facts``): the
    ``added`` columns, the ``widened`` types, the new ``computed`` columns, the design its
    options now ask for, and the pipeline's claim on it; returns the design changes made."""
    stored, properties, options = facts
    add_columns(spark, identifier, added)
    for name, wider in widened.items():
        execute(spark, f"ALTER TABLE {identifier} ALTER COLUMN {quote(name)} TYPE {wider}")
    add_columns(spark, identifier, computed)
    changes = [f"computed column {n} added" for n in computed]
    now = stored | {c: t.spark_type for c, t in added.items()} | widened
    now |= {n: c.spark_type for n, c in computed.items()}
    changes += evolve_design(spark, identifier, options, properties, now)
    claimed = owner.claim(properties) if owner is not None else {}
    if claimed:
        assigned = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in claimed.items())
        execute(spark, f"ALTER TABLE {identifier} SET TBLPROPERTIES ({assigned})")
    return changes


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
