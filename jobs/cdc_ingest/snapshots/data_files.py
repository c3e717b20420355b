"""A small table's rows written as one Parquet data file, with what pyiceberg derives from the
table's schema and properties built once per process.

pyiceberg's ``_dataframe_to_data_files`` converts the rows' Arrow schema back to an Iceberg
schema, sanitizes the table's column names, converts every batch to the file schema, builds the
statistics plan and column mapping, and hands the write to a thread pool, for every file: most
of what a small table's file costs, paid by each of the hundreds of small tables a batch creates or
rewrites (``first_snapshot``, ``overwrite_snapshot``). Rows already in the table's Arrow types
(``iceberg_schema.as_table_rows``) of a table of primitive columns, smaller than one target
file, are written here in the calling thread: the same file schema (field ids), writer options
and statistics as pyiceberg's. Anything else is written by pyiceberg.

Private API: ``_dataframe_to_data_files``, ``_get_parquet_writer_kwargs``; pyiceberg is pinned
0.12.*, and tests/test_data_files.py compares these files and entries with pyiceberg's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uuid

    import pyarrow as pa
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table.locations import LocationProvider
    from pyiceberg.table.metadata import TableMetadata

# Laid-out schemas kept per process: a batch's tables, a few thousand at most; past that the
# cache starts again rather than grow.
_MOST_LAYOUTS = 4096


@dataclass(frozen=True)
class _Layout:
    """What pyiceberg derives from a table's schema and properties for each file it writes."""

    arrow_schema: pa.Schema  # the file schema in Arrow, with each column's field id
    writer_options: dict[str, Any]
    row_group_rows: int
    target_bytes: int
    statistics_plan: Any
    column_ids: dict[str, int]


_layouts: dict[tuple[Any, ...], _Layout | None] = {}


def _layout_key(metadata: TableMetadata) -> tuple[Any, ...]:
    schema = metadata.schema()
    fields = tuple((f.field_id, f.name, str(f.field_type), f.required) for f in schema.fields)
    return fields, tuple(sorted(metadata.properties.items()))


def _layout(metadata: TableMetadata) -> _Layout | None:
    """The table's layout, or None where pyiceberg must write: nested columns, names it would
    sanitize, a format other than Parquet."""
    from pyiceberg.io.pyarrow import (
        _get_parquet_writer_kwargs,
        compute_statistics_plan,
        parquet_path_to_id_mapping,
        schema_to_pyarrow,
    )
    from pyiceberg.schema import sanitize_column_names
    from pyiceberg.table import TableProperties
    from pyiceberg.utils.properties import property_as_int

    schema, properties = metadata.schema(), metadata.properties
    file_format = properties.get(
        TableProperties.WRITE_FILE_FORMAT, TableProperties.WRITE_FILE_FORMAT_DEFAULT
    )
    if (
        str(file_format).lower() != "parquet"
        or any(not f.field_type.is_primitive for f in schema.fields)
        or sanitize_column_names(schema) != schema
    ):
        return None
    return _Layout(
        arrow_schema=schema_to_pyarrow(schema, include_field_ids=True).remove_metadata(),
        writer_options=_get_parquet_writer_kwargs(properties),
        row_group_rows=property_as_int(
            properties,
            TableProperties.PARQUET_ROW_GROUP_LIMIT,
            TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT,
        )
        or TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT,
        target_bytes=property_as_int(
            properties,
            TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
            TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
        )
        or TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
        statistics_plan=compute_statistics_plan(schema, properties),
        column_ids=parquet_path_to_id_mapping(schema),
    )


def _cached_layout(metadata: TableMetadata) -> _Layout | None:
    key = _layout_key(metadata)
    if key not in _layouts:
        if len(_layouts) >= _MOST_LAYOUTS:
            _layouts.clear()
        _layouts[key] = _layout(metadata)
    return _layouts[key]


def write_data_files(
    metadata: TableMetadata,
    locations: LocationProvider,
    io: FileIO,
    rows: pa.Table,
    commit: uuid.UUID,
) -> list[DataFile]:
    """``rows`` (in the table's Arrow types) written as the data files of the table whose
    metadata is ``metadata``, named for the write ``commit`` at ``locations`` (the table's
    location provider), as pyiceberg's ``_dataframe_to_data_files`` writes them."""
    import pyarrow as pa

    if not rows.num_rows:
        return []
    layout = _cached_layout(metadata) if metadata.spec().is_unpartitioned() else None
    table = None
    if layout is not None and rows.nbytes <= layout.target_bytes:
        try:
            table = pa.Table.from_arrays(rows.columns, schema=layout.arrow_schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            table = None
    if layout is None or table is None:
        from pyiceberg.io.pyarrow import _dataframe_to_data_files

        return list(_dataframe_to_data_files(metadata, rows, io, commit))
    return [_write_one(metadata, layout, locations, io, table, commit)]


def _write_one(
    metadata: TableMetadata,
    layout: _Layout,
    locations: LocationProvider,
    io: FileIO,
    table: pa.Table,
    commit: uuid.UUID,
) -> DataFile:
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import data_file_statistics_from_parquet_metadata
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    path = locations.new_data_location(data_file_name=f"00000-0-{commit}.parquet")
    with io.new_output(path).create(overwrite=True) as stream:
        writer = pq.ParquetWriter(
            stream, schema=table.schema, store_decimal_as_integer=True, **layout.writer_options
        )
        writer.write(table, row_group_size=layout.row_group_rows)
        writer.close()
        size = stream.tell()
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=writer.writer.metadata,
        stats_columns=layout.statistics_plan,
        parquet_column_mapping=layout.column_ids,
    )
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )
