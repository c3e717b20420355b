"""The change contract every stage shares: the columns a decoder adds, the kinds of change, types.

A decoder turns landed records (one row per Kafka record, ``key`` and ``value`` as JSON text) into
*changes*: the same rows with the columns in ``CHANGE_COLUMNS`` added, computed with Spark column
expressions only. Everything vendor-specific (where the table name, operation, key, row image and
ordering value live) stays in the decoder; typing, collapsing and applying are shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# What a decoder adds to each record:
#   src_db, src_schema, src_table  where the change happened (strings, db/schema may be null)
#   op           the vendor's operation name, as written in the message
#   kind         one of KINDS: what the change means for the mirror
#   order        array<bigint>: vendor ordering value, compared element by element (stored as
#                ``ordering`` encodes it, with the landing position after it)
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

# Jackson's default limit on a JSON string is 20,000,000 characters (StreamReadConstraints): a
# valid line holding a longer value was "not valid JSON". Spark's JSON functions take the
# option maxStringLen; a JVM string holds at most 2^31 - 1 characters, which is the limit now.
JSON_MAX_STRING_LENGTH = str(2**31 - 1)

UPSERT = "upsert"
DELETE = "delete"
NOOP = "noop"
DDL = "ddl"
KINDS = (UPSERT, DELETE, NOOP, DDL)
# Kind of a Kafka record whose offset an earlier batch applied (set after decoding).
DUPLICATE = "duplicate"
# Kind of a change to a source table the pipeline does not mirror (include_tables, exclude_tables).
EXCLUDED = "excluded"


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
