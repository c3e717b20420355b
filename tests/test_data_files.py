"""A small table's rows written by ``snapshots/data_files.py`` make the file and the data-file entry
pyiceberg's own writer makes (``_dataframe_to_data_files``), for every table after the first
too; what that module does not lay out itself is written by pyiceberg."""

from __future__ import annotations

import datetime
import decimal
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cdc_ingest.snapshots import data_files
from cdc_ingest.snapshots.data_files import write_data_files
from cdc_ingest.snapshots.iceberg_schema import as_table_rows, iceberg_schema
from pyiceberg.io.pyarrow import PyArrowFileIO, _dataframe_to_data_files
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

_COLUMNS = {
    "id": "bigint",
    "note": "string",
    "price": "decimal(10,2)",
    "seen": "timestamp",
    "day": "date",
    "ok": "boolean",
    "_cdc_order": "binary",
}
_UTC = datetime.UTC
_ROWS = {
    "id": [3, 1, 2],
    # Longer than the 16 characters Iceberg's default metrics keep of a string's bounds.
    "note": ["a fairly long note, truncated in bounds", None, "b"],
    "price": [decimal.Decimal("1.50"), decimal.Decimal("-2.25"), None],
    "seen": [datetime.datetime(2026, 11, 27, 10, tzinfo=_UTC), None, None],
    "day": [datetime.date(2026, 1, 2), datetime.date(2025, 12, 31), None],
    "ok": [True, None, False],
    "_cdc_order": [b"\x00\x00\x00\x00\x00\x00\x00\x03", b"\x00" * 8, None],
}
_ENTRY_FIELDS = (
    "content",
    "file_format",
    "record_count",
    "file_size_in_bytes",
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
    "split_offsets",
    "sort_order_id",
    "equality_ids",
)


def _metadata(tmp_path: Path, name: str, columns: dict[str, str], **properties: str) -> Any:
    schema = iceberg_schema(columns, ("id",))
    assert schema is not None
    return new_table_metadata(
        schema,
        UNPARTITIONED_PARTITION_SPEC,
        UNSORTED_SORT_ORDER,
        (tmp_path / name).as_uri(),
        {"format-version": "2", **properties},
    )


def _both(metadata: Any, rows: pa.Table) -> tuple[list[Any], list[Any]]:
    io = PyArrowFileIO()
    locations = load_location_provider(metadata.location, metadata.properties)
    rows = as_table_rows(rows, metadata.schema())
    theirs = list(_dataframe_to_data_files(metadata, rows, io, uuid.uuid4()))
    ours = write_data_files(metadata, locations, io, rows, uuid.uuid4())
    return theirs, ours


def _fields(entry: Any) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in _ENTRY_FIELDS}


def _path(entry: Any) -> str:
    return str(entry.file_path).removeprefix("file://")


def test_a_small_tables_file_and_entry_are_pyicebergs(tmp_path: Path) -> None:
    data_files._layouts.clear()
    # Two tables of the same schema: the second is written with the layout the first built.
    for name in ("t1", "t2"):
        theirs, ours = _both(_metadata(tmp_path, name, _COLUMNS), pa.table(_ROWS))
        assert len(theirs) == len(ours) == 1
        assert _fields(ours[0]) == _fields(theirs[0])
        assert ours[0].record_count == 3
        # The bounds Iceberg's default metrics keep: the first 16 characters of a string.
        assert ours[0].lower_bounds[2] == b"a fairly long no"
        assert _path(ours[0]).startswith(str(tmp_path / name / "data"))
        ours_file, theirs_file = pq.ParquetFile(_path(ours[0])), pq.ParquetFile(_path(theirs[0]))
        # Iceberg's readers find columns by the field ids in the file's schema (field metadata).
        assert ours_file.schema_arrow.equals(theirs_file.schema_arrow, check_metadata=True)
        assert ours_file.schema_arrow.field("note").metadata == {b"PARQUET:field_id": b"2"}
        assert ours_file.read().to_pylist() == theirs_file.read().to_pylist()
    assert len(data_files._layouts) == 1


@pytest.mark.parametrize(
    ("why", "columns", "rows", "properties"),
    [
        ("a list column", {"id": "bigint", "tags": "array<string>"}, {"tags": [["a"], None]}, {}),
        ("a name Avro cannot carry", {"id": "bigint", "a-b": "string"}, {"a-b": ["x", None]}, {}),
        (
            "rows larger than one target file",
            {"id": "bigint", "note": "string"},
            {"note": ["x" * 100, "y" * 100]},
            {"write.target-file-size-bytes": "64"},
        ),
    ],
)
def test_what_it_does_not_lay_out_is_written_by_pyiceberg(
    tmp_path: Path, why: str, columns: dict[str, str], rows: dict[str, Any], properties: Any
) -> None:
    metadata = _metadata(tmp_path, "t", columns, **properties)
    theirs, ours = _both(metadata, pa.table({"id": [1, 2], **rows}))
    assert len(ours) == len(theirs) >= 1, why
    assert [_fields(e) for e in ours] == [_fields(e) for e in theirs], why
    read = pa.concat_tables(pq.read_table(_path(e)) for e in ours)
    assert sorted(read.column("id").to_pylist()) == [1, 2], why


def test_no_rows_make_no_file(tmp_path: Path) -> None:
    metadata = _metadata(tmp_path, "t", {"id": "bigint"})
    locations = load_location_provider(metadata.location, metadata.properties)
    empty = pa.table({"id": pa.array([], pa.int64())})
    assert write_data_files(metadata, locations, PyArrowFileIO(), empty, uuid.uuid4()) == []
    assert not (tmp_path / "t").exists()
