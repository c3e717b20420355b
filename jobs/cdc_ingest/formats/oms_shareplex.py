"""OceanBase OMS SharePlex serialization (seed 001).

``{"data": {…}, "meta": {"op": "ins"|"upd"|"del", "table": "db.table", "scn", "seq", "time",
"rowid", …}, "key": {…}}``. ``ins`` and ``del`` carry full rows. ``upd`` carries only the modified
columns in ``data`` and the full row before the update in ``key``: the new row is ``key`` patched
with ``data``, so columns the update did not touch keep their values. Messages do not name the
key columns: they come from the pipeline's ``keys``. Values carry no types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DELETE, UPSERT
from cdc_ingest.formats.base import Message, MessageDecoder, unknown
from cdc_ingest.formats.common import (
    lookup,
    mark_inexact_numbers,
    number,
    parse_error,
)

if TYPE_CHECKING:
    pass

SCHEMA = "data map<string,string>, key map<string,string>, meta map<string,string>, _corrupt string"
SHAPE = "a JSON object with data and meta {op, table}"
OPS = {"ins": UPSERT, "upd": UPSERT, "del": DELETE}


class OmsSharePlexDecoder(MessageDecoder):
    """OMS SharePlex JSON."""

    name: ClassVar[str] = "oms-shareplex"
    json_schema = SCHEMA
    image_json_paths: ClassVar[tuple[str, ...]] = ("$.data", "$.key")

    def message(self, m: Column, value: Column) -> Message:
        meta, data, previous = m.getField("meta"), m.getField("data"), m.getField("key")
        op = meta.getItem("op")
        kind = lookup(OPS, F.lower(op))
        is_update = F.lower(op) == "upd"
        untouched = F.map_filter(previous, lambda k, _: ~F.array_contains(F.map_keys(data), k))
        image = mark_inexact_numbers(
            F.when(is_update, F.map_concat(untouched, data)).otherwise(data), value
        )
        qualified = self.source_table(meta.getItem("table"))
        has_db = F.instr(qualified, ".") > 0
        table = F.when(has_db, F.substring_index(qualified, ".", -1)).otherwise(qualified)
        db = F.when(
            has_db, F.expr("substring(_m.meta['table'], 1, instr(_m.meta['table'], '.') - 1)")
        )
        return Message(
            op=op,
            kind=kind,
            table=table,
            order=F.array(number(meta.getItem("scn")), number(meta.getItem("seq"))),
            image=image,
            db=db,
            event_ms=F.unix_millis(F.to_timestamp(meta.getItem("time"))),
            before=F.when(is_update, previous),
            problems=[
                (m.getField("_corrupt").isNotNull(), parse_error(value, self.name, SHAPE)),
                (op.isNull(), F.lit("message has no meta.op")),
                (kind.isNull(), unknown("meta.op", op)),
                (qualified.isNull(), F.lit("message names no table (meta.table)")),
                (data.isNull(), F.concat(F.lit("op "), op, F.lit(" has no data"))),
                (
                    is_update & previous.isNull(),
                    F.lit(
                        "upd carries only the modified columns and no previous row in 'key': "
                        "the full new row cannot be known"
                    ),
                ),
            ],
        )
