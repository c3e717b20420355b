"""Tables a batch creates are typed, collapsed and counted together (``apply/fresh_tables.py``),
yet each keeps its own rows, dead letters, tombstones, counts and commit (a resumed batch
reports them: ``test_batch_counts.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from cdc_ingest.apply.group_layout import group_layout
from cdc_ingest.apply.groups import GROUP_COLUMNS, GroupMember, layout_groups
from cdc_ingest.contract import ColumnType
from cdc_ingest.schema.target import TargetTable
from lakehouses import JDBC_FILE, REST_S3


def _canal(table: str, kind: str, data: dict[str, Any], es: int, types: dict[str, str]) -> Any:
    return {
        "data": [data],
        "database": "shop",
        "es": es,
        "isDdl": False,
        "mysqlType": types,
        "old": None,
        "pkNames": ["id"],
        "sql": "",
        "table": table,
        "type": kind,
    }


TEXT = {"id": "INT", "v": "VARCHAR(10)"}
COUNTED = {"id": "INT", "qty": "INT"}
PRICED = {"id": "INT", "v": "DECIMAL(10,2)"}


def _new_tables_batch() -> list[Any]:
    """Four new tables: two that agree on their columns (orders, items), one whose ``v`` has
    another type (prices), one that only receives a delete (gone)."""
    return [
        _canal("orders", "INSERT", {"id": 1, "v": "a"}, 1, TEXT),
        _canal("items", "INSERT", {"id": 1, "qty": 5}, 2, COUNTED),
        _canal("orders", "INSERT", {"id": 2, "v": "b"}, 3, TEXT),
        _canal("prices", "INSERT", {"id": 1, "v": "9.50"}, 4, PRICED),
        _canal("orders", "UPDATE", {"id": 1, "v": "a2"}, 5, TEXT),
        _canal("items", "INSERT", {"id": 2, "qty": "lots"}, 6, COUNTED),
        _canal("gone", "DELETE", {"id": 9, "v": "x"}, 7, TEXT),
        _canal("orders", "DELETE", {"id": 2, "v": "b"}, 8, TEXT),
        _canal("prices", "UPDATE", {"id": 1, "v": "9.75"}, 9, PRICED),
    ]


# A group of few changes is collected by the job that classifies it; chunk_rows=2 makes this one
# large enough to be kept in a local checkpoint and collected in chunks instead.
@pytest.mark.parametrize(
    ("lake", "chunk_rows"), [(JDBC_FILE, None), (REST_S3, None), (JDBC_FILE, 2)], indirect=["lake"]
)
def test_new_tables_of_one_batch_keep_their_own_outcomes(lake, chunk_rows):
    if chunk_rows:
        lake.route_at(chunk_rows=chunk_rows)
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", _new_tables_batch())

    summary = lake.run("shop")

    assert lake.rows("orders") == [{"id": 1, "v": "a2"}]
    assert lake.rows("items") == [{"id": 1, "qty": 5}]
    assert [(r["id"], str(r["v"])) for r in lake.rows("prices")] == [(1, "9.75")]
    assert lake.rows("gone") == []
    outcomes = {
        name: (t.messages, t.inserted, t.superseded, t.deleted_absent, t.dead_lettered, t.created)
        for name, t in summary.tables.items()
    }
    assert outcomes == {
        # insert 1, insert 2, update 1, delete 2: the newest of key 1 inserted, key 2 deleted
        # before it ever reached the table (a tombstone), two superseded.
        "orders": (4, 1, 2, 1, 0, True),
        "items": (1, 1, 0, 0, 1, True),
        "prices": (2, 1, 1, 0, 0, True),
        "gone": (1, 0, 0, 1, 0, True),
    }
    [letter] = lake.dead_letters()
    assert (letter["target_table"], letter["line"]) == ("items", 6)
    assert letter["reason"] == "column 'qty': value 'lots' is not a valid bigint"
    tombstones = lake.table("_cdc_tombstones").collect()
    assert sorted(r["target_table"] for r in tombstones) == ["gone", "orders"]


def test_a_table_a_batch_creates_is_created_with_its_key_and_rows_in_one_commit(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [_canal("orders", "INSERT", {"id": 1, "v": "a"}, 1, TEXT)])

    summary = lake.run("shop")

    # One metadata file, the table's first, holds the CREATE (the key as identifier field) and
    # the snapshot of its rows (snapshots/first_snapshot.py), with the batch's counts on it.
    entries = lake.spark.sql(f"SELECT * FROM {lake.catalog}.ods.orders.metadata_log_entries")
    [entry] = entries.collect()
    assert entry["latest_snapshot_id"] is not None
    [snapshot] = lake.spark.sql(f"SELECT * FROM {lake.catalog}.ods.orders.snapshots").collect()
    assert snapshot["operation"] == "append"
    assert snapshot["parent_id"] is None
    assert snapshot["summary"]["added-records"] == "1"
    assert snapshot["summary"]["total-records"] == "1"
    assert snapshot["summary"]["cdc.batch-id"] == str(summary.batch_id)
    assert lake.rows("orders") == [{"id": 1, "v": "a"}]
    jvm = lake.spark.sparkContext._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        lake.spark._jsparkSession, f"{lake.catalog}.ods.orders"
    )
    assert list(table.schema().identifierFieldNames()) == ["id"]
    assert not table.schema().findField("id").isOptional()
    properties = dict(table.properties())
    assert properties["cdc.keys"] == "id"
    assert properties["write.merge.mode"] == "merge-on-read"
    assert properties["owner"]
    # Created through pyiceberg (cdc_ingest.snapshots), where Iceberg's JdbcCatalog would put it
    # (pyiceberg's own default is <warehouse>/ods.db/orders), with Java's default codec stored.
    assert table.location() == f"{lake.root.as_uri()}/warehouse/ods/orders"
    assert properties["write.parquet.compression-codec"] == "zstd"


def test_a_table_another_writer_creates_first_fails_the_run_which_a_rerun_completes(
    lake, monkeypatch
):
    from cdc_ingest.snapshots import arrow_catalog
    from cdc_ingest.state.warehouse_errors import WarehouseWriteError

    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [_canal("orders", "INSERT", {"id": 1, "v": "a"}, 1, TEXT)])
    # The table is made with its first rows: another writer (a second run of the pipeline)
    # creating it after this batch found it missing makes the catalog refuse this creation.
    _another_writer_creates(lake, monkeypatch, arrow_catalog, "orders")
    with pytest.raises(WarehouseWriteError, match=r"ods\.orders: TableAlreadyExistsError"):
        lake.run("shop")
    monkeypatch.undo()

    summary = lake.run("shop")

    assert lake.rows("orders") == [{"id": 1, "v": "a"}]
    assert summary.tables["orders"].inserted == 1
    assert lake.dead_letters() == []


def _another_writer_creates(lake: Any, monkeypatch: Any, module: Any, name: str) -> None:
    """Another writer creates ``name`` (id bigint, v string) in ods just before ``module``
    registers the tables a batch made."""
    from cdc_ingest.contract import ColumnType
    from cdc_ingest.snapshots.first_snapshot import register_tables
    from cdc_ingest.state.tables import create_target, qualified
    from cdc_ingest.writers.spark_writer import SparkWriter

    def another_writer_first(*args: Any) -> None:
        columns = {"id": ColumnType("bigint"), "v": ColumnType("string")}
        identifier = qualified(lake.catalog, "ods", name)
        writer = SparkWriter(lake.spark, lake.catalog)
        create_target(lake.spark, identifier, columns, ("id",), writer=writer)
        register_tables(*args)

    monkeypatch.setattr(module, "register_tables", another_writer_first)


def test_the_tables_of_a_group_are_registered_in_one_catalog_transaction(lake, monkeypatch):
    from cdc_ingest.snapshots import arrow_catalog, first_snapshot

    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [_canal(f"t{t}", "INSERT", {"id": 1, "v": f"v{t}"}, t, TEXT) for t in range(5)],
    )
    registered: list[list[str]] = []
    commits: list[int] = []
    register_tables = first_snapshot.register_tables

    def spy(catalog: Any, staged: list[Any]) -> None:
        from sqlalchemy import event

        registered.append([name for (_, name), _ in staged])
        count = lambda connection: commits.append(1)  # noqa: E731
        event.listen(catalog.engine, "commit", count)
        try:
            register_tables(catalog, staged)
        finally:
            event.remove(catalog.engine, "commit", count)

    monkeypatch.setattr(arrow_catalog, "register_tables", spy)
    summary = lake.run("shop")

    assert registered == [["t0", "t1", "t2", "t3", "t4"]]
    assert len(commits) == 1
    assert {n: t.inserted for n, t in summary.tables.items()} == {f"t{t}": 1 for t in range(5)}
    for t in range(5):
        assert lake.rows(f"t{t}") == [{"id": 1, "v": f"v{t}"}]


def test_a_table_of_a_group_another_writer_creates_first_is_named_and_the_rerun_completes(
    lake, monkeypatch
):
    from cdc_ingest.snapshots import arrow_catalog
    from cdc_ingest.state.warehouse_errors import WarehouseWriteError

    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [_canal(f"t{t}", "INSERT", {"id": 1, "v": f"v{t}"}, t, TEXT) for t in range(5)],
    )
    _another_writer_creates(lake, monkeypatch, arrow_catalog, "t3")
    with pytest.raises(WarehouseWriteError, match=r"Table ods\.t3 already exists"):
        lake.run("shop")
    monkeypatch.undo()

    summary = lake.run("shop")

    # The other writer's t3 is empty: this batch's row is applied to it by the rerun.
    for t in range(5):
        assert lake.rows(f"t{t}") == [{"id": 1, "v": f"v{t}"}]
    assert sum(t.inserted for t in summary.tables.values()) == 5
    assert lake.dead_letters() == []


def test_a_new_table_refused_at_its_write_still_exists_after_the_batch(lake, monkeypatch):
    from cdc_ingest.snapshots.arrow_catalog import ArrowCatalog
    from cdc_ingest.table_options import TableDesignError

    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            _canal("orders", "INSERT", {"id": 1, "v": "a"}, 1, TEXT),
            _canal("items", "INSERT", {"id": 1, "v": "x"}, 2, TEXT),
        ],
    )
    # Both join one group of new tables, whose creation waits for their rows; the write of
    # items fails as the table's own fault: its changes are dead-lettered, and the table is
    # still created (empty), as it was when creation came first.
    append = ArrowCatalog.append

    def refuse_items(catalog: ArrowCatalog, identifier: str, *args: Any) -> bool:
        if identifier.endswith("`items`"):
            raise TableDesignError("items refused by the test")
        return append(catalog, identifier, *args)

    monkeypatch.setattr(ArrowCatalog, "append", refuse_items)
    summary = lake.run("shop")

    assert lake.rows("orders") == [{"id": 1, "v": "a"}]
    assert lake.rows("items") == []
    assert summary.dead_lettered == 1
    [letter] = lake.dead_letters()
    assert letter["target_table"] == "items"


def _fresh(name: str, **columns: str) -> GroupMember:
    target = TargetTable(
        name=name,
        identifier=f"`lake`.`ods`.`{name}`",
        keys=("id",),
        columns={c: ColumnType(t) for c, t in columns.items()},
        tombstones="`lake`.`ods`.`_cdc_tombstones`",
    )
    return GroupMember(target, rows=1)


def test_tables_share_a_group_while_their_slots_fit():
    a = _fresh("a", id="bigint", v="string")
    b = _fresh("b", id="bigint", w="double")
    c = _fresh("c", id="bigint", v="decimal(10,2)")  # v is a string in a
    d = _fresh("d", id="bigint", v="decimal(10,2)", w="double")
    wide = _fresh("wide", id="bigint", **{f"c{i}": "string" for i in range(GROUP_COLUMNS)})
    e = _fresh("e", id="bigint")

    groups = layout_groups([a, b, c, d, wide, e])

    names = [[t.target.name for t in group] for group in groups]
    # wide's 64 strings take a's v slot and 63 more: 67 slots with the first group's four.
    assert names == [["a", "b", "c", "d", "e"], ["wide"]]
    layout = group_layout([t.target for t in groups[0]], GROUP_COLUMNS)
    assert layout is not None
    # Two slots hold only columns named v, of two types: neither can be named v.
    assert layout.slots == {
        "id": ColumnType("bigint"),
        "_cdc_slot_1": ColumnType("string"),
        "w": ColumnType("double"),
        "_cdc_slot_3": ColumnType("decimal(10,2)"),
    }
    assert layout.slot_of("d") == {"id": "id", "v": "_cdc_slot_3", "w": "w"}
    assert layout.slot_of("e") == {"id": "id"}


def test_tables_of_columns_of_their_own_share_slots_of_one_type():
    one = _fresh("one", id="bigint", v1="bigint", note1="string")
    two = _fresh("two", id="bigint", note2="string", v2="bigint")

    layout = group_layout([one.target, two.target], GROUP_COLUMNS)

    assert layout is not None
    assert layout.slots == {
        "id": ColumnType("bigint"),
        "_cdc_slot_1": ColumnType("bigint"),
        "_cdc_slot_2": ColumnType("string"),
    }
    # In each table's own order, for its rows' writes.
    assert list(layout.slot_of("two").items()) == [
        ("id", "id"),
        ("note2", "_cdc_slot_2"),
        ("v2", "_cdc_slot_1"),
    ]
    assert layout.names_rows(["one", "two"]) == (
        ["_cdc_target", "_cdc_name_1", "_cdc_name_2"],
        [("one", "v1", "note1"), ("two", "v2", "note2")],
    )


def _jobs_of_run(lake: Any, pipeline: str) -> tuple[int, Any]:
    """How many Spark jobs a run on the shared session starts, and its summary."""
    context = lake.spark.sparkContext
    group = f"fresh-{pipeline}"
    context.setJobGroup(group, "a run counted by test_fresh_tables")
    try:
        summary = lake.run(pipeline)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return len(context.statusTracker().getJobIdsForGroup(group)), summary


def test_the_tables_a_batch_creates_are_appended_without_a_job_each(lake):
    # Two pipelines of the same shape: one batch creating 2 tables, one creating 12 (each with two
    # inserts). A Spark append per table would add ten jobs to the second.
    for pipeline, tables in (("few", 2), ("many", 12)):
        lake.add_pipeline(pipeline, "canal-json", namespace=pipeline)
        messages = [
            _canal(f"t{t}", "INSERT", {"id": i, "v": f"{t}-{i}"}, t * 10 + i, TEXT)
            for t in range(tables)
            for i in (1, 2)
        ]
        lake.land(pipeline, "001.json", messages)

    few, _ = _jobs_of_run(lake, "few")
    many, summary = _jobs_of_run(lake, "many")

    assert many == few
    assert set(summary.tables) == {f"t{t}" for t in range(12)}
    assert lake.rows("t11", namespace="many") == [{"id": 1, "v": "11-1"}, {"id": 2, "v": "11-2"}]
    notes = lake.spark.sql(
        f"SELECT summary['cdc.batch-id'] AS batch, summary['cdc.counts'] AS counts "
        f"FROM {lake.catalog}.many.t11.snapshots"
    ).collect()
    assert [r["batch"] for r in notes] == ["1"]
    assert '"inserted": 2' in notes[0]["counts"]


def test_a_small_batch_into_a_new_table_runs_one_spark_job_per_pass(lake):
    # A batch of a few lines is one partition: its first pass (the inventory) and its
    # classification are one job each, with no job for a shuffle's map side, a local checkpoint's
    # count or a separate collect of the rows to append (five jobs more before).
    lake.add_pipeline("shop", "canal-json")
    messages = [_canal("orders", "INSERT", {"id": i, "v": f"v{i}"}, i, TEXT) for i in range(10)]
    lake.land("shop", "001.json", messages)

    jobs, summary = _jobs_of_run(lake, "shop")

    assert jobs == 2
    assert summary.tables["orders"].inserted == 10
    assert len(lake.rows("orders")) == 10


def test_a_small_batch_whose_types_are_inferred_runs_one_more_spark_job(lake):
    # Debezium JSON without schemas: the column types are inferred from the images, by one job
    # whose sample is chosen from the first pass's counts (no counting job of its own).
    # A pipeline name of its own: the jobs are counted by a job group named after it.
    lake.add_pipeline("inferred", "debezium-json", keys={"orders": ["id"]})
    source = {"db": "shop", "table": "orders", "ts_ms": 1}
    messages = [
        {"op": "c", "ts_ms": i, "after": {"id": i, "v": f"v{i}"}, "source": source}
        for i in range(10)
    ]
    lake.land("inferred", "001.json", messages)

    jobs, summary = _jobs_of_run(lake, "inferred")

    assert jobs == 3
    assert summary.tables["orders"].inserted == 10
    assert lake.rows("orders")[0] == {"id": 0, "v": "v0"}
