"""The manifest writers that build their Avro layout once (``snapshots/manifest_writers.py``) write
the bytes pyiceberg's own writers write, for every file after the first too."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from cdc_ingest.snapshots.manifest_writers import manifest_list_writer, manifest_writer
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import BinaryType, LongType, NestedField, StringType


def _schema(extra: str) -> Schema:
    return Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, extra, StringType()),
        NestedField(3, "_cdc_order", BinaryType()),
        identifier_field_ids=[1],
    )


def _entry(snapshot_id: int, path: str) -> ManifestEntry:
    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=3,
        file_size_in_bytes=1234,
        column_sizes={1: 40, 2: 50},
        value_counts={1: 3, 2: 3},
        null_value_counts={1: 0, 2: 1},
        nan_value_counts={},
        lower_bounds={1: (1).to_bytes(8, "little"), 2: b"a"},
        upper_bounds={1: (3).to_bytes(8, "little"), 2: b"c"},
        split_offsets=[4],
        sort_order_id=0,
    )
    return ManifestEntry.from_args(
        status=ManifestEntryStatus.ADDED,
        snapshot_id=snapshot_id,
        sequence_number=None,
        file_sequence_number=None,
        data_file=data_file,
    )


# Iceberg's names of the codecs (write.avro.compression-codec), as the writers are given them.
@pytest.mark.parametrize("codec", ["gzip", "zstd", "null"])
def test_manifests_and_lists_are_the_bytes_pyiceberg_writes(
    tmp_path: Path, monkeypatch: Any, codec: Any
) -> None:
    # Each Avro file has a random sync marker: fixed here so that files can be compared whole.
    monkeypatch.setattr(os, "urandom", lambda n: b"\x5a" * n)
    io = PyArrowFileIO()
    # Two tables of different schemas in a row: the second reuses the layout the first built.
    for n, column in enumerate(("v", "note")):
        schema, snapshot_id = _schema(column), 1000 + n
        entry = _entry(snapshot_id, f"file:///w/t{n}/data/a.parquet")
        written: dict[str, Any] = {}
        for who, make in (("pyiceberg", write_manifest), ("ours", manifest_writer)):
            out = io.new_output(str(tmp_path / f"{who}-m{n}.avro"))
            with make(2, UNPARTITIONED_PARTITION_SPEC, schema, out, snapshot_id, codec) as writer:
                writer.add(entry)
            written[who] = writer.to_manifest_file()
        assert _bytes(tmp_path, "ours", f"m{n}") == _bytes(tmp_path, "pyiceberg", f"m{n}")
        for who, make_list in (("pyiceberg", write_manifest_list), ("ours", manifest_list_writer)):
            out = io.new_output(str(tmp_path / f"{who}-l{n}.avro"))
            with make_list(2, out, snapshot_id, None, 7 + n, codec) as manifests:
                manifests.add_manifests([written["pyiceberg"]])
        assert _bytes(tmp_path, "ours", f"l{n}") == _bytes(tmp_path, "pyiceberg", f"l{n}")


def _bytes(root: Path, who: str, name: str) -> bytes:
    data = (root / f"{who}-{name}.avro").read_bytes()
    assert data.startswith(b"Obj\x01") and len(data) > 500
    return data
