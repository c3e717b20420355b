"""Oracle GoldenGate's JSON formatter (``ogg-json``).

``{"table": "SCHEMA.TABLE", "op_type": "I|U|D|T", "op_ts": "2020-05-13 15:40:06.000000",
"current_ts", "pos": "00000000000000000000143", "primary_keys": [...], "tokens": {...},
"before": {row}, "after": {row}}``. ``primary_keys`` is there when the formatter is configured
with ``includePrimaryKeys`` (else the pipeline's ``keys`` name the key); ``tokens`` with
``includeTokens`` (ignored). An insert carries ``after``, a delete ``before``, an update both (or
only ``after`` in compressed mode); a truncate (``T``) empties the table.

Order: the trail position ``pos`` (sequence number and offset, as digits), then ``op_ts``.
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DDL, DELETE, NOOP, UPSERT
from cdc_ingest.formats.base import Message, MessageDecoder, unknown
from cdc_ingest.formats.common import (
    lookup,
    mark_inexact_numbers,
    non_empty,
    number,
    parse_error,
)

SCHEMA = (
    "table string, op_type string, op_ts string, pos string, primary_keys array<string>, "
    "before map<string,string>, after map<string,string>, _corrupt string"
)
SHAPE = "a JSON object with table, op_type and before or after"
OPS = {"I": UPSERT, "U": UPSERT, "D": DELETE, "T": DDL}
# The last digits of pos that fit a bigint alongside the leading ones (a trail's RBA).
_POS_TAIL = 10


class OggDecoder(MessageDecoder):
    """Oracle GoldenGate JSON (``ogg-json``)."""

    name: ClassVar[str] = "ogg-json"
    json_schema = SCHEMA
    image_json_paths: ClassVar[tuple[str, ...]] = ("$.after", "$.before")

    def message(self, m: Column, value: Column) -> Message:
        tombstone = value.isNull() | (F.trim(value) == "")
        op = F.upper(F.trim(m.getField("op_type")))
        kind = F.when(tombstone, F.lit(NOOP)).otherwise(lookup(OPS, op))
        qualified = self.source_table(m.getField("table"))
        parts = F.split(qualified, r"\.")
        count = F.size(parts)
        table = F.when(qualified.isNotNull(), F.element_at(parts, -1))
        schema = F.when(count >= 2, F.element_at(parts, -2))
        catalog = F.when(count >= 3, F.element_at(parts, -3))
        pos = F.regexp_replace(F.coalesce(m.getField("pos"), F.lit("")), r"[^0-9]", "")
        head = F.when(F.length(pos) > _POS_TAIL, pos.substr(F.lit(1), F.length(pos) - _POS_TAIL))
        tail = F.when(pos != "", F.substring(pos, -_POS_TAIL, _POS_TAIL))
        op_ts = F.to_timestamp(m.getField("op_ts"))
        after, before = m.getField("after"), m.getField("before")
        image = F.when(kind == DELETE, F.coalesce(before, after)).otherwise(after)
        return Message(
            op=F.when(tombstone, F.lit("tombstone")).otherwise(m.getField("op_type")),
            kind=kind,
            table=table,
            schema=schema,
            db=catalog,
            order=F.array(number(head), number(tail), number(F.unix_micros(op_ts))),
            image=mark_inexact_numbers(image, value),
            key_names=non_empty(m.getField("primary_keys")),
            event_ms=F.unix_millis(op_ts),
            # A truncate empties the table, as the statement would.
            ddl=F.when(kind == DDL, F.concat(F.lit("TRUNCATE TABLE "), table)),
            before=F.when(op == "U", before),
            problems=[
                (tombstone, None),
                (m.getField("_corrupt").isNotNull(), parse_error(value, self.name, SHAPE)),
                (op.isNull(), F.lit("message has no op_type")),
                (kind.isNull(), unknown("op_type", m.getField("op_type"))),
                (qualified.isNull(), F.lit("message names no table")),
                (kind == DDL, None),
                (
                    image.isNull(),
                    F.concat(
                        F.lit("op_type "),
                        op,
                        F.when(kind == DELETE, F.lit(" message has no 'before'")).otherwise(
                            F.lit(" message has no 'after'")
                        ),
                    ),
                ),
            ],
        )
