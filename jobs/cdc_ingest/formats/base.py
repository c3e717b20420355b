"""What a vendor decoder is: it adds the columns of :mod:`cdc_ingest.contract` to landed records.

Most formats are one JSON message per record: they subclass :class:`MessageDecoder`, which parses
each record once with the format's schema, asks the format the small questions (:meth:`message`:
kind, op, table, order, image, keys, ...) as Spark column expressions, and assembles the change
columns and the first problem of each message (its dead-letter reason) in one place.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import ColumnType, TypeHint
from cdc_ingest.formats.common import JSON_OPTIONS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Decoder(ABC):
    """One vendor format."""

    name: ClassVar[str]
    #: JSON paths of the row image inside a message, tried in order, for inferring column types
    #: from sample messages when the message declares none.
    image_json_paths: ClassVar[tuple[str, ...]] = ()
    #: Whether a delete may name no table (an Aerospike delete carries no set): such a delete
    #: (``src_table`` null) then applies to every table of the namespace keyed like it.
    deletes_without_table: ClassVar[bool] = False
    #: Whether a table whose messages name no key (and whose key the pipeline does not configure)
    #: is kept append-only instead of dead-lettering its changes.
    keyless_tables_append_only: ClassVar[bool] = False
    #: Values that stand for "not sent, unchanged" (Debezium's TOAST placeholder, as text and as
    #: Base64 bytes): such a column keeps its stored value instead of taking the placeholder.
    unavailable_values: ClassVar[tuple[str, ...]] = ()
    #: Ops of a message that is the before half of an update sent as two messages sharing the
    #: first ordering value (DataHub's UPDATE_BEFOR, then UPDATE_AFTER). Such a message changes no
    #: row; its image is the row before, so that a pair whose key differs moves the row.
    before_half_ops: ClassVar[tuple[str, ...]] = ()
    #: Whether messages may embed a Kafka Connect schema (``{"schema", "payload"}``), which an
    #: Avro or Parquet landing file's writer schema then supplies (landing.containers).
    embeds_connect_schema: ClassVar[bool] = False
    #: Whether DDL records travel apart from the rows (a schema-change topic of their own): then
    #: a statement is placed among the rows by the ordering value, else by landing position
    #: (file, line, row), which for a format sending both in one stream is its order.
    statements_apart: ClassVar[bool] = False
    #: Columns the decoder itself adds to each image under the job's prefix (``_cdc_``, which no
    #: source column may take): the format's own metadata kept in the mirror.
    own_columns: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self, options: dict[str, Any] | None = None, bound_table: str | None = None
    ) -> None:
        """Keep the pipeline's format options (see :mod:`cdc_ingest.formats.options`).

        ``bound_table``: the pipeline's one target table, when its ``table:`` has no placeholders
        (as Flink's and Paimon's table-bound Canal sources): a message that names no table is
        mirrored there instead of being dead-lettered.
        """
        self.options: dict[str, Any] = dict(options or {})
        self.bound_table = bound_table
        # ``column_names: lowercase``: every column name as its lowercase (Paimon's
        # case-sensitive=false), so that ``ID`` and ``id`` across messages are one column.
        self.lowercase_columns = False
        # Columns the pipeline's routes add to routed rows (schema/routes): the shard's names,
        # strings, under names a source column may not take.
        self.routed_columns: frozenset[str] = frozenset()

    def source_table(self, table: Column) -> Column:
        """The message's table name, or the bound table for a message that names none."""
        if self.bound_table is None:
            return table
        return F.coalesce(table, F.lit(self.bound_table))

    @abstractmethod
    def decode(self, records: DataFrame) -> DataFrame:
        """Add the ``CHANGE_COLUMNS`` to landed records.

        Args:
            records: one row per Kafka record with at least ``key`` and ``value`` (JSON text, or
                the string itself for a JSON string, or null).

        Returns:
            ``records`` with every column of ``CHANGE_COLUMNS`` added.
        """

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        """Column types declared by one distinct ``schema_hint`` value, or None to infer them."""
        return None

    def decode_changes(self, records: DataFrame) -> DataFrame:
        """:meth:`decode`, with column names as the pipeline spells them."""
        decoded = self.decode(records)
        return lowercase_column_names(decoded) if self.lowercase_columns else decoded

    def column_types(self, schema_hint: str) -> TypeHint | None:
        """:meth:`type_hint`, with column names as the pipeline spells them."""
        hint = self.type_hint(schema_hint)
        if hint is None or not self.lowercase_columns:
            return hint
        columns: dict[str, ColumnType] = {}
        for name, column_type in hint.columns.items():
            columns.setdefault(name.lower(), column_type)
        return TypeHint(columns, hint.default)


def lowercase_column_names(decoded: DataFrame) -> DataFrame:
    """Row images, key values and key names with lowercase column names; a message naming one
    column in two spellings (``ID`` and ``id``) is an error rather than a guess."""
    images = ("image", "key_values", "before")
    clash = F.lit(False)
    for name in images:
        keys = F.map_keys(name)
        lowered = F.transform(keys, lambda k: F.lower(k))
        clash = clash | (F.size(F.array_distinct(lowered)) < F.size(keys))
    error = F.when(
        F.col("error").isNull() & F.coalesce(clash, F.lit(False)),
        F.lit(
            "the message names a column in two spellings that differ only in case "
            "(column_names: lowercase)"
        ),
    ).otherwise(F.col("error"))
    ok = F.col("error").isNull() & ~F.coalesce(clash, F.lit(False))
    lowered_columns = {
        name: F.when(ok, F.transform_keys(name, lambda k, _: F.lower(k))).otherwise(F.col(name))
        for name in images
    }
    lowered_columns["key_names"] = F.transform("key_names", lambda k: F.lower(k))
    lowered_columns["error"] = error
    return decoded.withColumns(lowered_columns)


# A check of a message: (when, why). The first check that holds decides; a reason of None means
# the message is fine (checks after it are not asked).
Problem = tuple[Column, Column | None]


@dataclass(frozen=True)
class Message:
    """A format's answers about each parsed message, as Spark column expressions.

    The five first are required; the others are null when a format does not know them (see
    :mod:`cdc_ingest.contract` for what each column means). ``problems`` are the format's checks
    in order; ``value`` replaces the record's ``value`` (a format that decodes it, e.g. Base64).
    """

    op: Column
    kind: Column
    table: Column
    order: Column
    image: Column
    problems: Sequence[Problem]
    db: Column | None = None
    schema: Column | None = None
    key_names: Column | None = None
    key_values: Column | None = None
    schema_hint: Column | None = None
    event_ms: Column | None = None
    ddl: Column | None = None
    row_in_message: Column | None = None
    before: Column | None = None
    value: Column | None = None


def first_problem(problems: Sequence[Problem]) -> Column:
    """The reason of the first check that holds (null when none does, or when it says fine)."""
    none = F.lit(None).cast("string")
    if not problems:
        return none
    (when, why), *rest = problems
    reason = F.when(when, none if why is None else why)
    for when, why in rest:
        reason = reason.when(when, none if why is None else why)
    return reason


def unknown(what: str, op: Column, suffix: str | Column = "") -> Column:
    """``unknown <what> '<op>'<suffix>``: the reason for an operation the format does not know."""
    tail = F.lit(suffix) if isinstance(suffix, str) else suffix
    return F.concat(F.lit(f"unknown {what} '"), op, F.lit("'"), tail)


def _or_null(column: Column | None, spark_type: str) -> Column:
    return F.lit(None).cast(spark_type) if column is None else column


class MessageDecoder(Decoder):
    """A format of one JSON message per record: parse once, answer :meth:`message`.

    Subclasses set :attr:`json_schema` (what ``from_json`` reads, in PERMISSIVE mode with the
    unreadable line's text in ``_corrupt``) or override :meth:`parse`.
    """

    json_schema: ClassVar[str]

    def parse(self, records: DataFrame) -> DataFrame:
        """The records with the parsed message in ``_m`` (one row per change it carries)."""
        return records.withColumn("_m", F.from_json(F.col("value"), self.json_schema, JSON_OPTIONS))

    @abstractmethod
    def message(self, m: Column, value: Column) -> Message:
        """The change columns of the parsed message ``m`` of the line ``value``."""

    def decode(self, records: DataFrame) -> DataFrame:
        parsed = self.parse(records)
        msg = self.message(F.col("_m"), F.col("value"))
        kept = [
            msg.value.alias(c) if c == "value" and msg.value is not None else F.col(c)
            for c in records.columns
        ]
        return parsed.select(
            *kept,
            _or_null(msg.db, "string").alias("src_db"),
            _or_null(msg.schema, "string").alias("src_schema"),
            msg.table.alias("src_table"),
            msg.op.alias("op"),
            msg.kind.alias("kind"),
            msg.order.alias("order"),
            msg.image.alias("image"),
            _or_null(msg.key_names, "array<string>").alias("key_names"),
            _or_null(msg.key_values, "map<string,string>").alias("key_values"),
            _or_null(msg.schema_hint, "string").alias("schema_hint"),
            first_problem(msg.problems).alias("error"),
            _or_null(msg.event_ms, "bigint").alias("event_ms"),
            _or_null(msg.ddl, "string").alias("ddl"),
            (F.lit(0) if msg.row_in_message is None else msg.row_in_message).alias(
                "row_in_message"
            ),
            _or_null(msg.before, "map<string,string>").alias("before"),
        )
