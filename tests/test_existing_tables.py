"""Tables that hold rows already are classified together (``apply/existing_tables.py``): one plan
and one count for the batch's tables, yet each keeps its own outcomes, MERGE, dead letters and
tombstones."""

from __future__ import annotations

from typing import Any

import pytest
from canal_messages import TEXT, canal_message, outcomes, row_message
from lakehouses import JDBC_FILE, REST_S3
from spark_probes import count_local_checkpoints


def _tombstones(lake: Any) -> list[tuple[str, int]]:
    rows = lake.table("_cdc_tombstones").collect()
    return sorted((r["target_table"], r["batch_id"]) for r in rows)


# A group of few changes is collected by the job that classifies it; chunk_rows=2 makes this one
# large enough to be kept in a local checkpoint and collected in chunks instead.
@pytest.mark.parametrize(
    ("lake", "chunk_rows"), [(JDBC_FILE, None), (REST_S3, None), (JDBC_FILE, 2)], indirect=["lake"]
)
def test_existing_tables_classified_together_keep_their_own_outcomes(lake, chunk_rows, monkeypatch):

    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            row_message("orders", "INSERT", {"id": 1, "v": "a"}, 10),
            row_message("orders", "INSERT", {"id": 2, "v": "b"}, 11),
            row_message("orders", "DELETE", {"id": 9, "v": "z"}, 12),  # never there: a tombstone
            row_message("items", "INSERT", {"id": 1, "v": "x"}, 13),
            row_message("items", "INSERT", {"id": 2, "v": "y"}, 14),
            row_message("stock", "INSERT", {"id": 1, "qty": 5}, 16),
        ],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            row_message("orders", "UPDATE", {"id": 1, "v": "a2"}, 20),
            row_message("orders", "DELETE", {"id": 2, "v": "b"}, 21),
            row_message("orders", "INSERT", {"id": 9, "v": "late"}, 5),  # older than its tombstone
            row_message("orders", "INSERT", {"id": 3, "v": "c"}, 22),
            row_message("items", "UPDATE", {"id": 1, "v": "x-old"}, 3),  # older than the row
            row_message("items", "DELETE", {"id": 7, "v": "q"}, 23),
            row_message("items", "UPDATE", {"id": 2, "v": "y2"}, 24),
            row_message("items", "UPDATE", {"id": 2, "v": "y3"}, 25),
            row_message("stock", "UPDATE", {"id": 1, "qty": "lots"}, 26),
            row_message("stock", "UPDATE", {"id": 1, "qty": 6}, 27),
        ],
    )
    checkpoints = count_local_checkpoints(monkeypatch)
    if chunk_rows:
        lake.route_at(chunk_rows=chunk_rows)

    second = lake.run("shop")

    # The batch's own checkpoint and the dead letters', and the group's classification's when it
    # is not collected: one table at a time would add a checkpoint per table.
    assert len(checkpoints) == (3 if chunk_rows else 2)
    assert outcomes(second) == {
        # messages, inserted, updated, deleted, deleted absent, superseded, older, dead letters
        "orders": (4, 1, 1, 1, 0, 0, 1, 0),
        "items": (4, 0, 1, 0, 1, 1, 1, 0),
        "stock": (1, 0, 1, 0, 0, 0, 0, 1),
    }
    assert lake.rows("orders") == [{"id": 1, "v": "a2"}, {"id": 3, "v": "c"}]
    assert lake.rows("items") == [{"id": 1, "v": "x"}, {"id": 2, "v": "y3"}]
    assert lake.rows("stock") == [{"id": 1, "qty": 6}]
    [letter] = lake.dead_letters()
    assert (letter["target_table"], letter["line"]) == ("stock", 9)
    assert letter["reason"] == "column 'qty': value 'lots' is not a valid bigint"
    assert _tombstones(lake) == [("items", 2), ("orders", 1), ("orders", 2)]
    # Each table's MERGE is its own commit, with its own counts (what a resumed batch reads).
    notes = lake.spark.sql(
        f"SELECT summary['cdc.batch-id'] AS batch, summary['cdc.counts'] AS counts "
        f"FROM {lake.catalog}.ods.items.snapshots ORDER BY committed_at"
    ).collect()
    assert [r["batch"] for r in notes] == ["1", "2"]
    assert '"superseded": 1' in notes[-1]["counts"]

    lake.land(
        "shop",
        "003.json",
        [
            # Newer than its tombstone, which it clears.
            row_message("orders", "INSERT", {"id": 9, "v": "back"}, 30),
            row_message("items", "INSERT", {"id": 7, "v": "late"}, 2),  # older than its tombstone
        ],
    )
    third = lake.run("shop")

    assert outcomes(third) == {
        "orders": (1, 1, 0, 0, 0, 0, 0, 0),
        "items": (1, 0, 0, 0, 0, 0, 1, 0),
    }
    assert lake.rows("orders") == [
        {"id": 1, "v": "a2"},
        {"id": 3, "v": "c"},
        {"id": 9, "v": "back"},
    ]
    assert lake.rows("items") == [{"id": 1, "v": "x"}, {"id": 2, "v": "y3"}]
    assert _tombstones(lake) == [("items", 2), ("orders", 2)]


def _two_small_tables(lake: Any) -> None:
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            row_message("orders", "INSERT", {"id": 1, "v": "a"}, 10),
            row_message("orders", "INSERT", {"id": 2, "v": "b"}, 11),
            row_message("orders", "INSERT", {"id": 3, "v": "c"}, 12),
            row_message("items", "INSERT", {"id": 1, "v": "x"}, 13),
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
            row_message("items", "UPDATE", {"id": 1, "v": "x2"}, 23),
        ],
    )


@pytest.mark.parametrize("lake", [JDBC_FILE, REST_S3], indirect=True)
def test_small_tables_are_rewritten_in_one_commit_without_delete_files(lake):
    _two_small_tables(lake)

    summary = lake.run("shop")

    assert outcomes(summary) == {
        "orders": (3, 1, 1, 1, 0, 0, 0, 0),
        "items": (1, 0, 1, 0, 0, 0, 0, 0),
    }
    assert lake.rows("orders") == [{"id": 1, "v": "a2"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"}]
    assert lake.rows("items") == [{"id": 1, "v": "x2"}]
    # One snapshot per batch; the second replaces the table's one file by one file, and leaves
    # no delete file for readers to apply (a MERGE here writes a position-delete file).
    assert lake.snapshot_files("orders") == [
        ("append", "1", "1", "0"),
        ("overwrite", "2", "1", "0"),
    ]
    assert lake.snapshot_files("items") == [("append", "1", "1", "0"), ("overwrite", "2", "1", "0")]
    order = lake.table("orders").where("id = 1").select("_cdc_op", "_cdc_batch_id").first()
    assert (order["_cdc_op"], order["_cdc_batch_id"]) == ("UPDATE", 2)


def test_a_small_table_rewritten_batch_after_batch_keeps_two_manifests(lake):
    _two_small_tables(lake)
    lake.run("shop")
    for batch in (3, 4, 5):
        lake.land(
            "shop",
            f"00{batch}.json",
            [
                row_message("orders", "UPDATE", {"id": 1, "v": f"a{batch}"}, 10 * batch),
                row_message("items", "UPDATE", {"id": 1, "v": f"x{batch}"}, 10 * batch + 1),
            ],
        )
        lake.run("shop")

        # The current snapshot lists the manifest of its one data file and the one recording the
        # file it replaced; the earlier rewrites' records stay with their own snapshots (each
        # rewrite carried them all on before: 1 + the number of rewrites).
        manifests = lake.spark.sql(
            f"SELECT added_data_files_count, existing_data_files_count, deleted_data_files_count"
            f" FROM {lake.catalog}.ods.orders.manifests ORDER BY deleted_data_files_count"
        ).collect()
        assert [tuple(m) for m in manifests] == [(1, 0, 0), (0, 0, 1)]
        assert lake.snapshot_files("orders")[-1] == ("overwrite", str(batch), "1", "0")
    assert lake.rows("orders") == [{"id": 1, "v": "a5"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"}]


def test_a_table_larger_than_a_rewrite_is_merged(lake):

    lake.route_at(rewritten_rows=2)
    _two_small_tables(lake)

    lake.run("shop")

    assert lake.rows("orders") == [{"id": 1, "v": "a2"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"}]
    assert lake.rows("items") == [{"id": 1, "v": "x2"}]
    # orders held 3 rows: merged (merge-on-read: a position-delete file); items held 1: rewritten.
    assert lake.snapshot_files("orders")[-1] == ("overwrite", "2", "2", "1")
    assert lake.snapshot_files("items")[-1] == ("overwrite", "2", "1", "0")


def test_a_column_the_changes_do_not_write_keeps_its_values(lake):
    # Created with soft deletes, then applied: the tables keep their _cdc_deleted column, which
    # the changes no longer write. A whole-table rewrite would null it; the MERGE keeps it.
    lake.add_pipeline("shop", "canal-json", deletes="soft")
    lake.land(
        "shop",
        "001.json",
        [
            row_message("orders", "INSERT", {"id": 1, "v": "a"}, 10),
            row_message("items", "INSERT", {"id": 1, "v": "x"}, 11),
        ],
    )
    lake.run("shop")
    lake.add_pipeline("shop", "canal-json", deletes="apply")
    lake.land(
        "shop",
        "002.json",
        [
            row_message("orders", "UPDATE", {"id": 1, "v": "a2"}, 20),
            row_message("items", "UPDATE", {"id": 1, "v": "x2"}, 21),
        ],
    )

    lake.run("shop")

    assert lake.rows("orders", "id", "v", "_cdc_deleted") == [
        {"id": 1, "v": "a2", "_cdc_deleted": False}
    ]
    assert lake.rows("items", "id", "v", "_cdc_deleted") == [
        {"id": 1, "v": "x2", "_cdc_deleted": False}
    ]


TYPED = {"id": "BIGINT", "amount": "DECIMAL(12,2)", "at": "DATETIME", "day": "DATE", "r": "DOUBLE"}


def test_a_rewrite_keeps_every_type_of_the_rows_it_carries_over(lake):
    import datetime as dt
    from decimal import Decimal

    def typed(table: str, kind: str, key: int, amount: str, es: int) -> dict[str, Any]:
        row = {"id": key, "amount": amount, "at": "2026-03-04 05:06:07", "day": "2026-03-04"}
        return canal_message(table, kind, {**row, "r": 0.5}, es, TYPED)

    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            typed("orders", "INSERT", 1, "1.25", 1),
            typed("orders", "INSERT", 2, "2.50", 2),
            typed("refunds", "INSERT", 1, "3.75", 3),
        ],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [typed("orders", "UPDATE", 2, "9.99", 4), typed("refunds", "UPDATE", 1, "0.01", 5)],
    )

    lake.run("shop")

    assert lake.snapshot_files("orders")[-1] == ("overwrite", "2", "1", "0")  # rewritten
    kept = {"at": dt.datetime(2026, 3, 4, 5, 6, 7), "day": dt.date(2026, 3, 4), "r": 0.5}
    assert lake.rows("orders", "id", "amount", "at", "day", "r") == [
        {"id": 1, "amount": Decimal("1.25"), **kept},
        {"id": 2, "amount": Decimal("9.99"), **kept},
    ]
    assert lake.rows("refunds", "id", "amount") == [{"id": 1, "amount": Decimal("0.01")}]


def test_small_tables_are_read_for_their_classification_without_a_spark_scan(lake, monkeypatch):
    from cdc_ingest.apply import existing_tables
    from cdc_ingest.state.tables import current_snapshot_facts as snapshot_facts

    read_by_spark: list[str] = []

    def spied(spark: Any, identifier: str) -> Any:
        read_by_spark.append(identifier.rsplit(".", 1)[-1].strip("`"))
        return snapshot_facts(spark, identifier)

    monkeypatch.setattr(existing_tables, "current_snapshot_facts", spied)
    _two_small_tables(lake)
    lake.run("shop")
    # Both tables were read by pyiceberg (one local relation), not planned as a scan each.
    assert read_by_spark == []
    assert lake.rows("orders") == [{"id": 1, "v": "a2"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"}]

    # Past the rows a group reads into the driver, the next table is read by Spark.
    lake.route_at(read_rows=1)
    lake.land(
        "shop",
        "003.json",
        [
            row_message("orders", "DELETE", {"id": 3, "v": "c"}, 30),
            row_message("orders", "UPDATE", {"id": 4, "v": "d2"}, 31),
            row_message("items", "UPDATE", {"id": 1, "v": "x3"}, 32),
            row_message("items", "UPDATE", {"id": 1, "v": "x-old"}, 3),  # older than the row
        ],
    )
    third = lake.run("shop")

    assert read_by_spark == ["orders"]  # items (1 row), read first, took the budget
    assert lake.rows("orders") == [{"id": 1, "v": "a2"}, {"id": 4, "v": "d2"}]
    assert lake.rows("items") == [{"id": 1, "v": "x3"}]
    assert outcomes(third)["items"] == (2, 0, 1, 0, 0, 1, 0, 0)


def test_small_tables_are_prepared_read_rewritten_and_committed_from_one_load(lake, monkeypatch):
    from cdc_ingest.snapshots import staged_commits
    from pyiceberg.catalog.sql import SqlCatalog

    _two_small_tables(lake)
    loaded: list[str] = []
    load_table = SqlCatalog.load_table
    committed_alone: list[str] = []
    commit_table = SqlCatalog.commit_table
    committed_together: list[list[str]] = []
    commit_staged = staged_commits.commit_staged

    def counted(catalog: Any, identifier: Any) -> Any:
        loaded.append(identifier[-1] if isinstance(identifier, tuple) else identifier)
        return load_table(catalog, identifier)

    def alone(catalog: Any, table: Any, *args: Any) -> Any:
        committed_alone.append(table.name()[-1])
        return commit_table(catalog, table, *args)

    def together(catalog: Any, staged: list[Any]) -> Any:
        committed_together.append(sorted(commit.identifier[1] for commit in staged))
        return commit_staged(catalog, staged)

    monkeypatch.setattr(SqlCatalog, "load_table", counted)
    monkeypatch.setattr(SqlCatalog, "commit_table", alone)
    monkeypatch.setattr(staged_commits, "commit_staged", together)
    summary = lake.run("shop")

    assert lake.snapshot_files("orders")[-1] == ("overwrite", "2", "1", "0")
    assert lake.snapshot_files("items")[-1] == ("overwrite", "2", "1", "0")
    assert outcomes(summary)["orders"] == (3, 1, 1, 1, 0, 0, 0, 0)
    assert lake.rows("items") == [{"id": 1, "v": "x2"}]
    # Each table is loaded once, for its preparation (columns, properties), which its
    # classification's read of keys and orders and its rewrite reuse (four loads each before,
    # two while pyiceberg's commit loaded it again); both rewrites are committed in one catalog
    # transaction, neither by pyiceberg's commit of one table.
    assert sorted(n for n in loaded if n in ("orders", "items")) == ["items", "orders"]
    assert committed_together == [["items", "orders"]]
    assert not {"items", "orders"} & set(committed_alone)


def test_a_column_added_to_a_small_table_in_a_group_is_written_by_its_rewrite(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            row_message("orders", "INSERT", {"id": 1, "v": "a"}, 10),
            row_message("orders", "INSERT", {"id": 2, "v": "b"}, 11),
            row_message("items", "INSERT", {"id": 1, "v": "x"}, 12),
        ],
    )
    lake.run("shop")
    wider = {**TEXT, "note": "VARCHAR(10)"}
    lake.land(
        "shop",
        "002.json",
        [
            canal_message("orders", "UPDATE", {"id": 1, "v": "a2", "note": "n1"}, 20, wider),
            canal_message("orders", "INSERT", {"id": 3, "v": "c", "note": "n3"}, 21, wider),
            row_message("items", "UPDATE", {"id": 1, "v": "x2"}, 22),
        ],
    )

    lake.run("shop")

    assert lake.snapshot_files("orders")[-1][0] == "overwrite"  # rewritten, not merged
    assert lake.rows("orders") == [
        {"id": 1, "v": "a2", "note": "n1"},
        {"id": 2, "v": "b", "note": None},
        {"id": 3, "v": "c", "note": "n3"},
    ]
    assert lake.rows("items") == [{"id": 1, "v": "x2"}]
