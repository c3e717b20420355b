"""The contract between a vendor decoder and the rest of the job.

A decoder turns landed records (one row per Kafka record, ``key`` and ``value`` as JSON text) into
*changes*: the same rows with the columns in ``CHANGE_COLUMNS`` added, computed with Spark column
expressions only. Everything vendor-specific (where the table name, operation, key, row image and
ordering value live) stays in the decoder; typing, collapsing and applying are shared.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# What a decoder adds to each record:
#   src_db, src_schema, src_table  where the change happened (strings, db/schema may be null)
#   op           the vendor's operation name, as written in the message
#   kind         one of KINDS: what the change means for the mirror
#   order        array<bigint>: vendor ordering value, compared element by element
#   image        map<string,string>: row after (upserts) or before (deletes), values as text
#   key_names    array<string>: key columns the message itself names, or null
#   key_values   map<string,string>: key values from outside the image (a Kafka key), or null
#   schema_hint  string: whatever the decoder needs to type the image's columns (see type_hint)
#   error        string: why the record cannot be applied; such records become dead letters
#   event_ms     bigint: source time of the change (or heartbeat), epoch millis, or null
#   ddl          string: the statement of a DDL record, or null
#   row_in_message  int: position of the row in a message that carries several (Canal), else 0
#   before       map<string,string>: for an upsert that updates a row, the row's values before it
#                (all columns, or only those that changed, like Canal's ``old``), else null; a key
#                that differs there is an UPDATE that moved the row to another key
CHANGE_COLUMNS = (
    "src_db",
    "src_schema",
    "src_table",
    "op",
    "kind",
    "order",
    "image",
    "key_names",
    "key_values",
    "schema_hint",
    "error",
    "event_ms",
    "ddl",
    "row_in_message",
    "before",
)

UPSERT = "upsert"
DELETE = "delete"
NOOP = "noop"
DDL = "ddl"
KINDS = (UPSERT, DELETE, NOOP, DDL)


@dataclass(frozen=True)
class ColumnType:
    """How to turn a column's JSON text into a typed Spark value.

    Attributes:
        spark_type: the Spark SQL type of the mirrored column (``bigint``, ``decimal(20,0)``…).
        encoding: how the JSON text encodes it: ``plain`` (a cast), ``base64`` (binary),
            ``epoch_days``/``epoch_millis``/``epoch_micros``/``epoch_nanos`` (dates and
            timestamps as numbers), ``epoch_seconds`` (seconds with an optional fraction),
            ``datetime`` (``YYYY-MM-DD HH:mm:ss[.f] [zone]`` text), ``connect_decimal`` (Kafka
            Connect's Base64 unscaled bytes).
        scale: the decimal scale for ``connect_decimal``.
    """

    spark_type: str
    encoding: str = "plain"
    scale: int = 0


@dataclass(frozen=True)
class TypeHint:
    """Column types a message declares (e.g. a Kafka Connect schema).

    Attributes:
        columns: declared types by column name.
        default: the type of columns not listed (e.g. HBase cells are all bytes), or None to infer.
    """

    columns: dict[str, ColumnType] = field(default_factory=dict)
    default: ColumnType | None = None


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

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        """Keep the pipeline's format options (see :mod:`cdc_ingest.formats.options`)."""
        self.options: dict[str, Any] = dict(options or {})

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
