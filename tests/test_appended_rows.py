"""A pipeline's system-table rows, read whole once and then from appended files only
(``cdc_ingest.state.appended_rows``), on a real pyiceberg table in a SQLite catalog file.

The proof that the older files are not read again: they are deleted from disk before the second
read, which a whole scan could not survive. Anything but appends since reads the table whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from cdc_ingest.state.lake import pipeline_rows

SCHEMA = pa.schema([("pipeline", pa.string()), ("batch_id", pa.int64()), ("file", pa.string())])


@pytest.fixture
def catalog(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    catalog = SqlCatalog(
        "rows", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh"
    )
    catalog.create_namespace("ods")
    schema = Schema(
        NestedField(1, "pipeline", StringType()),
        NestedField(2, "batch_id", LongType()),
        NestedField(3, "file", StringType()),
    )
    catalog.create_table(("ods", "_cdc_checkpoints"), schema)
    return catalog


def _append(catalog: Any, *rows: tuple[str, int, str]) -> None:
    table = catalog.load_table(("ods", "_cdc_checkpoints"))
    keys = ("pipeline", "batch_id", "file")
    table.append(pa.Table.from_pylist([dict(zip(keys, r, strict=True)) for r in rows], SCHEMA))


def _read(catalog: Any, pipeline: str) -> list[tuple[int, str]]:
    rows = pipeline_rows(catalog, "ods", "_cdc_checkpoints", pipeline, ("batch_id", "file"))
    assert rows is not None
    return sorted((r["batch_id"], r["file"]) for r in rows)


def _data_files(tmp_path: Path) -> set[Path]:
    return set((tmp_path / "wh").rglob("*.parquet"))


def test_later_reads_open_only_the_files_appended_since(catalog: Any, tmp_path: Path) -> None:
    _append(catalog, ("shop", 1, "a.json"), ("other", 1, "x.json"))
    _append(catalog, ("shop", 2, "b.json"))
    assert _read(catalog, "shop") == [(1, "a.json"), (2, "b.json")]
    assert _read(catalog, "other") == [(1, "x.json")]
    read_before = _data_files(tmp_path)
    _append(catalog, ("shop", 3, "c.json"), ("other", 2, "y.json"))
    _append(catalog, ("shop", 4, "d.json"))
    for path in read_before:  # a whole scan would now fail on a missing file
        path.unlink()

    assert _read(catalog, "shop") == [(1, "a.json"), (2, "b.json"), (3, "c.json"), (4, "d.json")]
    assert _read(catalog, "shop") == [(1, "a.json"), (2, "b.json"), (3, "c.json"), (4, "d.json")]
    assert _read(catalog, "other") == [(1, "x.json"), (2, "y.json")]


def test_anything_but_appends_since_reads_the_table_whole(catalog: Any) -> None:
    _append(catalog, ("shop", 1, "a.json"), ("shop", 2, "b.json"))
    assert _read(catalog, "shop") == [(1, "a.json"), (2, "b.json")]
    table = catalog.load_table(("ods", "_cdc_checkpoints"))
    table.delete("batch_id == 1")
    _append(catalog, ("shop", 3, "c.json"))
    assert _read(catalog, "shop") == [(2, "b.json"), (3, "c.json")]


def test_a_table_recreated_under_the_same_name_is_read_anew(catalog: Any) -> None:
    _append(catalog, ("shop", 1, "a.json"))
    assert _read(catalog, "shop") == [(1, "a.json")]
    schema = catalog.load_table(("ods", "_cdc_checkpoints")).schema()
    catalog.drop_table(("ods", "_cdc_checkpoints"))
    catalog.create_table(("ods", "_cdc_checkpoints"), schema)
    _append(catalog, ("shop", 7, "z.json"))
    assert _read(catalog, "shop") == [(7, "z.json")]
