"""pyiceberg's manifest and manifest-list writers, with their Avro layout built once per process.

pyiceberg builds the Avro schema of a manifest (from the table's partition type), resolves its
record writer and converts the schema to Avro's JSON for every file it writes: about a quarter
of the CPU of staging a new small table (``first_snapshot``), which a batch creating
hundreds of tables pays for each. For an unpartitioned table of format version 2, the only
tables created that way, the layout is the same for every table and file: built once here.
What each file carries of its own (the table's schema and partition spec in the header, the
snapshot's ids and sequence number) is written as pyiceberg writes it.

Private API: ``AvroOutputFile``'s attributes and header, ``ManifestWriter.new_writer``, the
schemas pyiceberg's writers build; pyiceberg is pinned 0.12.*, and tests/test_manifest_writers.py
compares these files with pyiceberg's own, byte for byte.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from pyiceberg.avro.codecs import (
    AVRO_CODEC_KEY,
    CODEC_MAPPING_ICEBERG_TO_AVRO,
    AvroCompressionCodec,
)
from pyiceberg.avro.file import (
    _SCHEMA_KEY,
    MAGIC,
    META_SCHEMA,
    SYNC_SIZE,
    AvroFileHeader,
    AvroOutputFile,
)
from pyiceberg.avro.resolver import construct_writer, resolve_writer
from pyiceberg.avro.writer import Writer
from pyiceberg.io import OutputFile
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_LIST_FILE_SCHEMAS,
    ManifestListWriter,
    ManifestListWriterV2,
    ManifestWriter,
    ManifestWriterV2,
    data_file_with_partition,
    manifest_entry_schema_with_data_file,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.typedef import TableVersion
from pyiceberg.types import StructType
from pyiceberg.utils.schema_conversion import AvroSchemaConversion


@dataclass(frozen=True)
class _Layout:
    """What pyiceberg derives from a file's schema: the same for every file of that schema."""

    file_schema: Schema
    writer: Writer
    avro_schema: str  # the file schema as Avro's JSON, in the header
    name: str


def _layout(file_schema: Schema, record_schema: Schema, name: str) -> _Layout:
    writer = resolve_writer(record_schema=record_schema, file_schema=file_schema)
    avro = json.dumps(AvroSchemaConversion().iceberg_to_avro(file_schema, schema_name=name))
    return _Layout(file_schema, writer, avro, name)


@cache
def _manifest_layout() -> _Layout:
    """A format-version-2 manifest of an unpartitioned table."""

    def entry(version: TableVersion) -> Schema:
        data_file = data_file_with_partition(format_version=version, partition_type=StructType())
        return manifest_entry_schema_with_data_file(format_version=version, data_file=data_file)

    return _layout(entry(2), entry(DEFAULT_READ_VERSION), "manifest_entry")


@cache
def _manifest_list_layout() -> _Layout:
    file_schema = MANIFEST_LIST_FILE_SCHEMAS[2]
    record_schema = MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION]
    return _layout(file_schema, record_schema, "manifest_file")


@cache
def _header_writer() -> Writer:
    return construct_writer(META_SCHEMA)


class _LaidOutFile(AvroOutputFile[Any]):
    """pyiceberg's Avro output file, taking its writer and schema from a built ``_Layout``."""

    def __init__(self, output_file: OutputFile, layout: _Layout, metadata: dict[str, str]):
        # AvroOutputFile's attributes, without resolving the writer again.
        self.output_file = output_file
        self.file_schema = layout.file_schema
        self.schema_name = layout.name
        self.sync_bytes = os.urandom(SYNC_SIZE)
        self.writer = layout.writer
        self.metadata = metadata
        self._avro_schema = layout.avro_schema

    def _write_header(self) -> None:
        codec = self.metadata[AVRO_CODEC_KEY]
        codec = CODEC_MAPPING_ICEBERG_TO_AVRO.get(codec, codec)
        meta = {**self.metadata, _SCHEMA_KEY: self._avro_schema, AVRO_CODEC_KEY: codec}
        _header_writer().write(self.encoder, AvroFileHeader(MAGIC, meta, self.sync_bytes))


class _ManifestWriter(ManifestWriterV2):
    def new_writer(self) -> AvroOutputFile[Any]:
        return _LaidOutFile(self._output_file, _manifest_layout(), self._meta)


class _ManifestListWriter(ManifestListWriterV2):
    def __enter__(self) -> ManifestListWriter:
        self._writer = _LaidOutFile(self._output_file, _manifest_list_layout(), self._meta)
        self._writer.__enter__()
        return self


def avro_compression(properties: Mapping[str, str]) -> AvroCompressionCodec:
    """The codec of a table's manifests (``write.avro.compression-codec``), as pyiceberg's
    snapshot producers read it."""
    codec = properties.get(
        TableProperties.WRITE_AVRO_COMPRESSION, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT
    )
    return cast(AvroCompressionCodec, codec)


def manifest_writer(
    format_version: TableVersion,
    spec: PartitionSpec,
    schema: Schema,
    output_file: OutputFile,
    snapshot_id: int,
    compression: AvroCompressionCodec,
) -> ManifestWriter:
    """``pyiceberg.manifest.write_manifest``, with the layout built once where it can be."""
    if format_version == 2 and spec.is_unpartitioned():
        return _ManifestWriter(spec, schema, output_file, snapshot_id, compression)
    return write_manifest(format_version, spec, schema, output_file, snapshot_id, compression)


def manifest_list_writer(
    format_version: TableVersion,
    output_file: OutputFile,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int,
    compression: AvroCompressionCodec,
) -> ManifestListWriter:
    """``pyiceberg.manifest.write_manifest_list``, with the layout built once where it can be."""
    if format_version == 2:
        return _ManifestListWriter(
            output_file, snapshot_id, parent_snapshot_id, sequence_number, compression
        )
    return write_manifest_list(
        format_version, output_file, snapshot_id, parent_snapshot_id, sequence_number, compression
    )
