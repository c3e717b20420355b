"""A keyed pyiceberg table ``shop.orders`` (``id`` and one string column) in a SQLite catalog
file, and its rows as Arrow: what the tests of pyiceberg commits made without Spark start from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa


def orders_table(tmp_path: Path, catalog_name: str, column: str) -> Any:
    """An empty ``shop.orders`` keyed by ``id``, with the string column ``column``."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    catalog = SqlCatalog(
        catalog_name, uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh"
    )
    catalog.create_namespace("shop")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, column, StringType()),
        identifier_field_ids=[1],
    )
    return catalog.create_table(("shop", "orders"), schema)


def orders_rows(column: str, prefix: str, ids: tuple[int, ...]) -> pa.Table:
    """Rows of ``ids``, each ``column`` holding ``prefix`` and its id."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), (column, pa.string())])
    return pa.Table.from_pylist([{"id": i, column: f"{prefix}{i}"} for i in ids], schema=schema)
