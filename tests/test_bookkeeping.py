"""A batch's bookkeeping (its plan and commit in ``_cdc_checkpoints``, its row of
``_cdc_batches``) is read and written by pyiceberg where the catalog allows
(``snapshots``): a few rows each, for which a Spark job would cost more than a small
batch's rows. What the rows and commits say is the same either way."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from canal_messages import canal_message
from lakehouses import JDBC_FILE, REST_S3


def _commits(lake: Any, table: str) -> list[dict[str, str]]:
    rows = lake.spark.sql(
        f"SELECT summary FROM {lake.catalog}.ods.{table}.snapshots ORDER BY committed_at"
    ).collect()
    return [dict(r["summary"]) for r in rows]


@pytest.mark.parametrize("lake", [JDBC_FILE, REST_S3], indirect=True)
def test_a_batch_is_planned_committed_and_recorded_without_a_spark_job(lake):
    # orders sorted, so that Spark writes its second batch (a small unsorted table's batches are
    # written by pyiceberg): the control that Spark's commits carry the application's id.
    lake.add_pipeline("shop", "canal-json", table_options={"orders": {"sort_by": ["id"]}})
    lake.land("shop", "001.json", [canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1)])
    before = datetime.now(UTC)

    first = lake.run("shop")

    after = datetime.now(UTC)
    checkpoints = _commits(lake, "_cdc_checkpoints")
    batches = _commits(lake, "_cdc_batches")
    # The plan, then the seal; then the batch's row: each one commit with the batch's notes. Iceberg
    # Spark's writes add the application's id to a commit (as the MERGE below shows); these
    # commits have none.
    assert [(c["cdc.pipeline"], c["cdc.batch-id"]) for c in checkpoints] == [("shop", "1")] * 2
    assert [(c["cdc.pipeline"], c["cdc.batch-id"]) for c in batches] == [("shop", "1")]
    assert [c["added-records"] for c in checkpoints + batches] == ["1", "2", "1"]
    assert all("spark.app.id" not in c for c in checkpoints + batches)
    rows = lake.table("_cdc_checkpoints").orderBy("recorded_at", "status").collect()
    assert [(r["batch_id"], r["status"], r["file_idx"], r["records"]) for r in rows] == [
        (1, "planned", 0, None),
        (1, "applied", 0, 1),
        (1, "committed", None, None),
    ]
    assert rows[0]["file"] == rows[1]["file"] == first.files[0]
    # Stored as the instants they were taken at (the session's time zone is UTC).
    stamps = [r["recorded_at"].replace(tzinfo=UTC) for r in rows]
    assert all(before <= stamp <= after for stamp in stamps)
    [row] = lake.table("_cdc_batches").collect()
    assert (row["batch_id"], row["lines"], row["messages"], row["inserted"]) == (1, 1, 1, 1)
    assert row["files"] == first.files

    # The next run reads that state back: only the new file is planned, as batch 2.
    lake.land("shop", "002.json", [canal_message("orders", "INSERT", {"id": 2, "v": "b"}, 2)])
    second = lake.run("shop")

    assert (second.batch_id, [f.rsplit("/", 1)[1] for f in second.files]) == (2, ["002.json"])
    assert lake.rows("orders") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert "spark.app.id" in _commits(lake, "orders")[-1]  # Spark's append to the sorted table
    assert all("spark.app.id" not in c for c in _commits(lake, "_cdc_checkpoints")[2:])
    assert lake.run("shop").files == []


@pytest.mark.parametrize("lake", [JDBC_FILE, REST_S3], indirect=True)
def test_system_tables_are_created_through_pyiceberg_as_spark_creates_them(lake, monkeypatch):
    from cdc_ingest.snapshots.arrow_catalog import ArrowCatalog
    from cdc_ingest.state.tables import SYSTEM_TABLES, ensure_system_tables
    from cdc_ingest.writers.spark_writer import SparkWriter

    created: list[str] = []
    create_keyed = ArrowCatalog.create_keyed

    def recorded(self: ArrowCatalog, identifier: str, *args: Any) -> Any:
        done = create_keyed(self, identifier, *args)
        if done:
            created.append(identifier.rsplit(".", 1)[1].strip("`"))
        return done

    monkeypatch.setattr(ArrowCatalog, "create_keyed", recorded)
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1)])

    lake.run("shop")
    # The same tables in another namespace, by Spark's CREATE TABLE.
    ensure_system_tables(SparkWriter(lake.spark, lake.catalog), lake.catalog, "by_spark")

    assert sorted(created) == sorted([*SYSTEM_TABLES, "orders"])
    jvm = lake.spark.sparkContext._jvm
    for name in SYSTEM_TABLES:
        ours, spark = (
            jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
                lake.spark._jsparkSession, f"{lake.catalog}.{namespace}.{name}"
            )
            for namespace in ("ods", "by_spark")
        )
        # Field ids, types and optionality; then the stored properties (the owner, the write
        # modes, Java's default codec) and the format version.
        assert ours.schema().toString() == spark.schema().toString(), name
        assert dict(ours.properties()) == dict(spark.properties()), name
        assert ours.operations().current().formatVersion() == 2, name
        assert ours.spec().isUnpartitioned() and ours.sortOrder().isUnsorted(), name
        assert ours.location().replace("/ods/", "/by_spark/") == spark.location(), name


@pytest.mark.parametrize("lake", [JDBC_FILE, REST_S3], indirect=True)
def test_a_small_batch_into_a_small_table_asks_spark_nothing_of_the_catalog(lake, monkeypatch):
    from pyspark.sql import SparkSession

    statements: list[str] = []
    sql = SparkSession.sql

    def recorded(self: SparkSession, text: str, *args: Any, **kwargs: Any) -> Any:
        statements.append(" ".join(text.split()[:2]))
        return sql(self, text, *args, **kwargs)

    monkeypatch.setattr(SparkSession, "sql", recorded)
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1)])
    lake.run("shop")
    # A SQLite catalog's first run: its database is created by Spark's catalog (pyiceberg never
    # creates one), whose tables pyiceberg then lists; a REST server's namespace is created by
    # pyiceberg.
    first = ["CREATE NAMESPACE"] if lake.kind == JDBC_FILE else []
    assert statements == first
    statements.clear()
    lake.land("shop", "002.json", [canal_message("orders", "UPDATE", {"id": 1, "v": "b"}, 2)])

    assert lake.run("shop").tables["orders"].updated == 1

    # The namespace, its tables, the state, the table's rows and its rewrite: all pyiceberg's.
    assert statements == []
    assert lake.rows("orders") == [{"id": 1, "v": "b"}]


def test_a_namespace_created_by_pyiceberg_is_one_spark_would_create(lake, monkeypatch):
    from cdc_ingest.config import load_config
    from cdc_ingest.snapshots.arrow_catalog import ArrowCatalog
    from cdc_ingest.state.tables import SYSTEM_TABLES, ensure_namespace

    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1)])
    lake.run("shop")  # the catalog's database
    ensure_namespace(lake.spark, lake.catalog, "by_spark")
    arrow = ArrowCatalog(load_config(lake.config_path).catalog)
    catalog = arrow.opened()
    assert catalog is not None

    owner = lake.spark.sparkContext._jvm.org.apache.spark.util.Utils.getCurrentUserName()
    assert arrow.ensure_namespace("by_pyiceberg", owner)
    # Another pipeline creating it meanwhile: both found it missing, the second insert fails on
    # the first's key; it is there, which is all a run asks.
    catalog.create_namespace("raced")
    asked: list[str] = []
    exists = catalog.namespace_exists

    def found_missing_first(namespace: str) -> bool:
        asked.append(namespace)
        return asked.count(namespace) > 1 and exists(namespace)

    with monkeypatch.context() as patched:
        patched.setattr(catalog, "namespace_exists", found_missing_first)
        assert arrow.ensure_namespace("raced", owner)
    assert asked == ["raced", "raced"]

    properties = catalog.load_namespace_properties
    assert (
        properties("by_pyiceberg") == properties("by_spark") == {"exists": "true", "owner": owner}
    )
    listed = {r[0] for r in lake.spark.sql(f"SHOW NAMESPACES IN {lake.catalog}").collect()}
    assert {"by_spark", "by_pyiceberg", "raced"} <= listed
    assert arrow.table_names("by_pyiceberg") == set() and arrow.table_names("absent") == set()
    assert arrow.table_names("ods") == {"orders", *SYSTEM_TABLES}
    arrow.close()


def test_a_run_with_pyiceberg_off_writes_its_bookkeeping_and_mirrors_through_spark(lake):
    # As in a catalog pyiceberg does not write: every commit of the run is Spark's.
    lake.route_at(pyiceberg=False)
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [canal_message("orders", "INSERT", {"id": 1, "v": "a"}, 1)])

    lake.run("shop")

    commits = [c for t in ("_cdc_checkpoints", "_cdc_batches", "orders") for c in _commits(lake, t)]
    assert len(commits) == 4  # the plan, the seal, the batch's row, the mirror's append
    assert all("spark.app.id" in c for c in commits)
    assert lake.rows("orders") == [{"id": 1, "v": "a"}]
