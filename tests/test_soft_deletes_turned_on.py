"""``deletes: soft`` given to a pipeline whose small table already holds rows: the next batch
adds the table's ``_cdc_deleted`` column and flags the deleted row, rather than failing to read
the table at a snapshot older than the column. A row written before holds null there, as an
added column does (docs/table-design.md)."""

from __future__ import annotations

from canal_messages import typed_message

TYPES = {"id": "INT", "v": "VARCHAR(10)"}


def test_soft_deletes_turned_on_for_a_table_that_holds_rows(lake):
    lake.add_pipeline("shop", "canal-json")
    held = [
        typed_message("orders", "INSERT", {"id": k, "v": v}, k, TYPES)
        for k, v in ((1, "a"), (2, "b"))
    ]
    lake.land("shop", "001.json", held)
    lake.run("shop")
    lake.pipelines[0]["deletes"] = "soft"
    lake.write_config()
    lake.land(
        "shop", "002.json", [typed_message("orders", "DELETE", {"id": 1, "v": "a"}, 3, TYPES)]
    )
    summary = lake.run("shop")
    assert summary.tables["orders"].deleted == 1
    rows = lake.table("orders").select("id", "v", "_cdc_deleted").orderBy("id").collect()
    assert [tuple(r) for r in rows] == [(1, "a", True), (2, "b", None)]
