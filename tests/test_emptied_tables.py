"""Tables that held rows and hold none now are read with the others of their group (issue 51,
defect 8: pyiceberg reads an emptied table (a snapshot of no files) in the Arrow types of its
schema, large_binary for the ordering value, while a table's files give binary; the group's
concatenation failed with ``ArrowInvalid``, twice in one real round)."""

from __future__ import annotations

import pyarrow as pa
from cdc_ingest.apply.existing_tables import _named_rows
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import BinaryType, IntegerType, NestedField


def test_an_emptied_tables_rows_concatenate_with_a_read_tables():
    schema = Schema(
        NestedField(1, "id", IntegerType(), required=False),
        NestedField(2, "_cdc_order", BinaryType(), required=False),
    )
    emptied = schema_to_pyarrow(schema, include_field_ids=False).empty_table()
    assert emptied.schema.field("_cdc_order").type == pa.large_binary()  # pyiceberg's choice
    read = pa.table(
        {"id": pa.array([1], pa.int32()), "_cdc_order": pa.array([b"\x01"], pa.binary())}
    )

    rows = pa.concat_tables([_named_rows(emptied, "a", ("id",)), _named_rows(read, "b", ("id",))])

    assert rows.to_pylist() == [{"_t_target": "b", "_t_id": 1, "_t_order": b"\x01"}]
