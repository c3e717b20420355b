"""Mirrors of Iceberg format version 3 (``properties: {format-version: 3}``): their MERGEs write
deletion vectors (Puffin files) instead of position-delete files, and every reader the product
documents reads them: Spark, pyiceberg; and ``maintain`` compacts them.
"""

from __future__ import annotations

from typing import Any

from canal_messages import canal_message
from conftest import Lake

V3 = {"table_options": {"*": {"properties": {"format-version": "3"}}}}
EXPECTED = [{"id": 1, "v": "a2"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"}]


def _pyiceberg_rows(lake: Lake) -> tuple[Any, list[dict[str, Any]]]:
    from cdc_ingest.config import load_config
    from cdc_ingest.state.lake import open_catalog

    table = open_catalog(load_config(lake.config_path).catalog).load_table("ods.orders")
    rows = table.scan(selected_fields=("id", "v")).to_arrow().to_pylist()
    return table, sorted(rows, key=lambda r: r["id"])


def _delete_files(lake: Lake) -> list[tuple[str, int]]:
    """Format and content of the table's live delete files (Iceberg's ``delete_files`` table)."""
    lake.table("orders")
    rows = lake.spark.sql(
        f"SELECT file_format, content FROM {lake.catalog}.ods.orders.delete_files"
    ).collect()
    return sorted((r["file_format"], r["content"]) for r in rows)


def test_a_v3_mirror_merges_with_deletion_vectors_that_every_reader_applies(lake: Lake) -> None:
    from cdc_ingest.config import load_config
    from cdc_ingest.maintenance import maintain_pipeline

    lake.add_pipeline("shop", "canal-json", **V3)
    lake.land(
        "shop",
        "001.json",
        [
            canal_message("orders", "INSERT", {"id": k, "v": v}, k)
            for k, v in ((1, "a"), (2, "b"), (3, "c"))
        ],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            canal_message("orders", "UPDATE", {"id": 1, "v": "a2"}, 10),
            canal_message("orders", "DELETE", {"id": 2, "v": "b"}, 11),
            canal_message("orders", "INSERT", {"id": 4, "v": "d"}, 12),
        ],
    )
    lake.run("shop")

    table, rows = _pyiceberg_rows(lake)
    assert table.format_version == 3
    # One deletion vector (a Puffin blob, position-delete content) for the held file's two rows.
    assert _delete_files(lake) == [("PUFFIN", 1)]
    assert lake.rows("orders") == EXPECTED
    assert rows == EXPECTED

    maintain_pipeline(lake.spark, load_config(lake.config_path), "shop")
    assert _delete_files(lake) == []
    assert lake.rows("orders") == EXPECTED
    assert _pyiceberg_rows(lake)[1] == EXPECTED
