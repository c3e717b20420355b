"""OceanBase OMS "Default" and "DefaultExtendColumnType" serializations (seed 001).

``{"allMetaData": {db, table_name, record_primary_key, record_primary_value, timestamp,
storeDataSequence, …}, "prevStruct": {…}, "postStruct": {…}, "recordType": …}``. Images are full
rows; key columns are named by ``record_primary_key`` (``\\u0001``-separated). Values carry no
types, so columns are typed from their JSON values. The Extend variant adds ``__light_type`` inside
the image: the columns' OMS types, never a column itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_ingest.contract import DDL, DELETE, NOOP, UPSERT, TypeHint
from cdc_ingest.formats.base import Message, MessageDecoder, unknown
from cdc_ingest.formats.common import (
    epoch_millis,
    lookup,
    mark_inexact_numbers,
    non_empty,
    number,
    parse_error,
)
from cdc_ingest.formats.oms_types import type_hint_from_names

if TYPE_CHECKING:
    pass

SCHEMA = (
    "allMetaData map<string,string>, prevStruct map<string,string>, "
    "postStruct map<string,string>, recordType string, _corrupt string"
)
SHAPE = "a JSON object with allMetaData, prevStruct, postStruct and recordType"
OPS = {
    "INSERT": UPSERT,
    "UPDATE": UPSERT,
    "ROW": UPSERT,  # full-synchronization row
    "DELETE": DELETE,
    "HEARTBEAT": NOOP,
    "DDL": DDL,
}
LIGHT_TYPE = "__light_type"
KEY_SEPARATOR = "\u0001"


class OmsDefaultDecoder(MessageDecoder):
    """OMS Default JSON."""

    name: ClassVar[str] = "oms-default"
    json_schema = SCHEMA
    image_json_paths: ClassVar[tuple[str, ...]] = ("$.postStruct", "$.prevStruct")

    def schema_hint(self, image: Column) -> Column:
        """Default messages declare no types: columns are typed from their values."""
        return F.lit(None).cast("string")

    def message(self, m: Column, value: Column) -> Message:
        meta, prev, post = (
            m.getField("allMetaData"),
            m.getField("prevStruct"),
            m.getField("postStruct"),
        )
        record_type = m.getField("recordType")
        kind = lookup(OPS, F.upper(record_type))
        full = F.when(kind == DELETE, prev).otherwise(post)
        table = self.source_table(meta.getItem("table_name"))
        primary_key = meta.getItem("record_primary_key")
        ddl = F.coalesce(post.getItem("ddl"), prev.getItem("ddl"))
        return Message(
            op=record_type,
            kind=kind,
            table=table,
            order=F.array(
                number(meta.getItem("storeDataSequence")), number(meta.getItem("timestamp"))
            ),
            image=mark_inexact_numbers(F.map_filter(full, lambda k, _: k != LIGHT_TYPE), value),
            db=meta.getItem("db"),
            key_names=non_empty(F.filter(F.split(primary_key, KEY_SEPARATOR), lambda k: k != "")),
            schema_hint=self.schema_hint(full),
            event_ms=epoch_millis(meta.getItem("timestamp")),
            ddl=F.when(kind == DDL, ddl),
            before=F.when(kind == UPSERT, prev),
            problems=[
                (m.getField("_corrupt").isNotNull(), parse_error(value, self.name, SHAPE)),
                (record_type.isNull(), F.lit("message has no recordType")),
                (kind.isNull(), unknown("recordType", record_type)),
                (kind == NOOP, None),
                ((kind == DDL) & ddl.isNull(), F.lit("DDL record has no 'ddl' statement")),
                (kind == DDL, None),
                (table.isNull(), F.lit("message names no table (allMetaData.table_name)")),
                (
                    (kind == UPSERT) & post.isNull(),
                    F.concat(F.lit("recordType "), record_type, F.lit(" has no postStruct")),
                ),
                ((kind == DELETE) & prev.isNull(), F.lit("recordType DELETE has no prevStruct")),
            ],
        )


class OmsDefaultExtendDecoder(OmsDefaultDecoder):
    """OMS DefaultExtendColumnType: Default plus ``__light_type`` column types."""

    name: ClassVar[str] = "oms-default-extend"

    def schema_hint(self, image: Column) -> Column:
        light = F.from_json(image.getItem(LIGHT_TYPE), "map<string,map<string,string>>")
        types = F.transform_values(light, lambda _, v: v.getItem("schemaType"))
        return F.when(light.isNotNull(), F.concat(F.lit("mysql:"), F.to_json(types)))

    def type_hint(self, schema_hint: str) -> TypeHint | None:
        return type_hint_from_names(schema_hint)
