"""A batch into one table that holds few rows is classified as a group of one and rewritten by
pyiceberg (``WritePolicy.keeps_group``): no Spark append or MERGE, so no delete
file; a table larger than a rewrite takes is merged alone, as before."""

from __future__ import annotations

from typing import Any

import pytest
from canal_messages import outcomes, row_message
from lakehouses import JDBC_FILE, REST_S3


def _one_table_two_batches(lake: Any) -> dict[str, Any]:
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            row_message("orders", "INSERT", {"id": 1, "v": "a"}, 10),
            row_message("orders", "INSERT", {"id": 2, "v": "b"}, 11),
            row_message("orders", "INSERT", {"id": 3, "v": "c"}, 12),
        ],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            row_message("orders", "UPDATE", {"id": 1, "v": "a2"}, 20),
            row_message("orders", "DELETE", {"id": 2, "v": "b"}, 21),
            row_message("orders", "INSERT", {"id": 4, "v": "d"}, 22),
            row_message("orders", "UPDATE", {"id": 3, "v": "old"}, 5),  # older than the row
        ],
    )
    return outcomes(lake.run("shop"))


@pytest.mark.parametrize("lake", [JDBC_FILE, REST_S3], indirect=True)
def test_one_small_table_is_rewritten_without_a_delete_file(lake):
    got = _one_table_two_batches(lake)

    # messages, inserted, updated, deleted, deleted absent, superseded, older, dead letters
    assert got == {"orders": (4, 1, 1, 1, 0, 0, 1, 0)}
    assert lake.rows("orders") == [{"id": 1, "v": "a2"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"}]
    # A MERGE of one table alone wrote a position-delete file here.
    assert lake.snapshot_files("orders") == [
        ("append", "1", "1", "0"),
        ("overwrite", "2", "1", "0"),
    ]
    assert [r["_cdc_op"] for r in lake.table("orders").orderBy("id").collect()] == [
        "UPDATE",
        "INSERT",
        "INSERT",
    ]
    assert [
        (r["target_table"], r["batch_id"]) for r in lake.table("_cdc_tombstones").collect()
    ] == [("orders", 2)]


def test_one_table_larger_than_a_rewrite_is_merged_alone(lake):

    lake.route_at(rewritten_rows=2)

    got = _one_table_two_batches(lake)

    assert got == {"orders": (4, 1, 1, 1, 0, 0, 1, 0)}
    assert lake.rows("orders") == [{"id": 1, "v": "a2"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"}]
    assert lake.snapshot_files("orders")[-1] == ("overwrite", "2", "2", "1")
