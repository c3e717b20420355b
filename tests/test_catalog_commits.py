"""Every commit a batch makes to the catalog passes through ``cdc_ingest.catalog_commits``, so its
hooks (the crash tests' fault points) see each one: checked by reading the job's source, and by
running batches with Spark's and pyiceberg's own commit calls watched beside the hooks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from canal_messages import ddl_message, typed_message
from cdc_ingest import catalog_commits

JOB = Path(__file__).resolve().parents[1] / "jobs" / "cdc_ingest"
TYPES = {"id": "INT", "v": "VARCHAR(10)", "n": "INT"}
TAGS = "id INT PRIMARY KEY, v VARCHAR(10)"


def _write_statements_around_the_door() -> list[str]:
    """``x.sql("<a write>")`` and ``writeTo(...)...append()/overwrite()`` outside the module."""
    found = []
    for path in JOB.rglob("*.py"):
        if path.name == "catalog_commits.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            where = f"{path.relative_to(JOB)}:{node.lineno}"
            if node.func.attr == "sql" and node.args:
                text = ast.unparse(node.args[0]).lstrip("f").strip("'\"")
                # A statement held in a variable is named so where it is a write (keyed_writes,
                # segmented); the batches below catch one that is not.
                if catalog_commits.is_commit(text) or text == "statement":
                    found.append(where)
            elif node.func.attr in ("append", "overwrite") and "writeTo(" in ast.unparse(node):
                found.append(where)
    return found


def test_no_write_of_the_job_goes_around_the_commit_hooks():
    assert _write_statements_around_the_door() == []


def test_a_statement_is_a_commit_point_unless_every_run_repeats_it():
    assert catalog_commits.is_commit("MERGE INTO t USING s ON ...")
    assert catalog_commits.is_commit("alter table t add columns (x int)")
    assert not catalog_commits.is_commit("CREATE TABLE IF NOT EXISTS t (x int)")
    assert not catalog_commits.is_commit("SELECT * FROM t")
    assert not catalog_commits.is_commit("CALL lake.system.expire_snapshots(table => 't')")


@pytest.fixture
def watched(monkeypatch):
    """The commits Spark and pyiceberg make, seen from their own classes (the oracle), and
    those the hooks heard."""
    from pyiceberg.table import Table
    from pyspark.sql import DataFrameWriterV2, SparkSession

    seen: list[str] = []
    heard: list[str] = []
    run_sql, append, do_commit = SparkSession.sql, DataFrameWriterV2.append, Table._do_commit

    def sql(self, query, *args, **kwargs):
        result = run_sql(self, query, *args, **kwargs)
        if catalog_commits.is_commit(query):
            seen.append(" ".join(query.split(None, 3)[:3]))
        return result

    def appended(self):
        append(self)
        seen.append("append")

    def table_commit(self, *args, **kwargs):
        do_commit(self, *args, **kwargs)
        seen.append("pyiceberg commit")

    monkeypatch.setattr(SparkSession, "sql", sql)
    monkeypatch.setattr(DataFrameWriterV2, "append", appended)
    monkeypatch.setattr(Table, "_do_commit", table_commit)
    altered: list[str] = []

    def hook(what: str, table: str | None) -> None:
        heard.append(what)
        altered.extend([table] if table else [])

    remove = catalog_commits.on_commit(hook)
    yield seen, heard, altered
    remove()


@pytest.mark.parametrize("pyiceberg", [True, False], ids=["pyiceberg writes", "spark writes"])
def test_the_hooks_hear_every_commit_of_batches_with_ddl_and_every_kind_of_table(
    lake, watched, pyiceberg
):
    seen, heard, altered = watched
    lake.route_at(pyiceberg=pyiceberg)
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [
            typed_message("orders", "INSERT", {"id": 1, "v": "a"}, 1, TYPES),
            typed_message("items", "INSERT", {"id": 1, "v": "x"}, 2, TYPES),
        ],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            ddl_message("orders", "ALTER TABLE orders ADD COLUMN n INT", "ALTER", 3),
            typed_message("orders", "UPDATE", {"id": 1, "v": "a", "n": 10}, 4, TYPES),
            ddl_message("tags", f"CREATE TABLE tags ({TAGS})", "CREATE", 5),
            typed_message("tags", "INSERT", {"id": 7, "v": "t"}, 6, TYPES),
            typed_message("items", "DELETE", {"id": 1, "v": "x"}, 7, TYPES),
            "not json",
        ],
    )
    lake.run("shop")
    # What the libraries' own calls saw, in order, the hooks heard too; the hooks also hear
    # the commits those calls do not make (many tables' rows at once, tables made through
    # Iceberg's API).
    own = ("pyiceberg create", "pyiceberg commit of rewrites", "iceberg create")
    assert [h for h in heard if not h.startswith(own)] == seen
    kinds = {h.split()[0] for h in heard}
    assert {"ALTER", "append"} <= kinds, heard
    assert ("pyiceberg" in kinds) is pyiceberg, heard
    # The ALTER of the DDL names its table, for the writer that keeps the table's schema.
    assert any(table.endswith(".`orders`") for table in altered), altered


def test_the_pyiceberg_writer_reads_a_table_again_once_spark_altered_it(lake):
    """What the pyiceberg writer keeps of a table it loaded (for its facts) is dropped when
    Spark's ALTER commits: its next read of the table has the new column."""
    from cdc_ingest.config import load_config
    from cdc_ingest.state.tables import qualified
    from cdc_ingest.writers.routing import table_writer
    from pyspark.sql import functions as F

    lake.add_pipeline("shop", "canal-json")
    first = typed_message("orders", "INSERT", {"id": 1, "v": "a"}, 1, TYPES)
    lake.land("shop", "001.json", [first])
    lake.run("shop")
    catalog = load_config(lake.config_path).catalog
    identifier = qualified(catalog.name, "ods", "orders")
    with table_writer(lake.spark, catalog) as writer:
        assert writer.appends_collected  # pyiceberg's, which keeps the tables it loaded
        columns, _ = writer.table_facts(identifier)
        assert "added" not in columns
        catalog_commits.execute(lake.spark, f"ALTER TABLE {identifier} ADD COLUMNS (added string)")
        # A snapshot of the new schema: the row of id 1 again as id 2, with the new column.
        held = lake.spark.table(identifier)
        second = held.withColumn("id", held["id"] + 1).withColumn("added", F.lit("x"))
        catalog_commits.append(second.writeTo(identifier))
        read = writer.read_columns(identifier, ["id", "added"], 100)
    assert read is not None
    assert sorted(read[1].to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "added": None},
        {"id": 2, "added": "x"},
    ]
