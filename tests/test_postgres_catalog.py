"""A ``postgresql://`` catalog on a real PostgreSQL server: two pipelines writing at once.

Both pipelines mirror into one namespace, so besides their own tables they commit concurrently to
the shared ``_cdc_`` tables (checkpoints, dead letters, tombstones) and race to create them. The
result is read back through Spark and through pyiceberg's SqlCatalog, both on the same catalog.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FIXTURES
from postgres_server import PostgresServer, serve_module

# Their CLI runs and DAG tasks run on the worker's warm engine (conftest.warm_engine).
pytestmark = pytest.mark.usefixtures("warm_engine")

CLI = str(Path(sys.executable).parent / "cdc-ingest")
CATALOG = "pglake"
NAMESPACE = "ods"
LINDORM_FILE = FIXTURES / "lindorm" / "sql-insert.jsonl"
DEBEZIUM_FILE = FIXTURES / "debezium-json" / "debezium-data-schema-exclude.txt"


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this module's own, stopped and removed afterwards."""
    yield from serve_module()


@pytest.fixture
def catalog_uri(postgres: PostgresServer) -> str:
    """A new database and role per test, as ``postgresql://user:password@host:port/db``."""
    database = f"iceberg_{os.urandom(4).hex()}"
    return postgres.create_database(database, owner=f"{database}_owner", password="s3cret-pw")


def debezium_final_rows(path: Path) -> list[dict[str, Any]]:
    """The products table a Debezium changelog leaves behind, replayed in file order."""
    rows: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        message = json.loads(line)
        if message["op"] == "d":
            rows.pop(message["before"]["id"], None)
        else:
            rows[message["after"]["id"]] = message["after"]
    return [rows[key] for key in sorted(rows)]


def later_delete(path: Path, product_id: int) -> dict[str, Any]:
    """A Debezium delete of ``product_id`` after every change in ``path`` (time and binlog)."""
    last = json.loads(path.read_text().splitlines()[-1])
    source = {**last["source"], "ts_ms": last["source"]["ts_ms"] + 1000}
    source["pos"] = last["source"]["pos"] + 1000
    return {
        **last,
        "before": {"id": product_id},
        "after": None,
        "op": "d",
        "ts_ms": last["ts_ms"] + 1000,
        "source": source,
    }


def write_pipelines(root: Path, catalog_uri: str) -> Path:
    """One pipelines file: a Lindorm and a Debezium JSON pipeline in one namespace."""
    landing = root / "landing"
    for name, fixture in (("customers", LINDORM_FILE), ("products", DEBEZIUM_FILE)):
        (landing / name).mkdir(parents=True)
        (landing / name / f"001-{fixture.name}").write_bytes(fixture.read_bytes())
    config = {
        "catalog": {
            "name": CATALOG,
            "uri": catalog_uri,
            "warehouse": (root / "warehouse").as_uri(),
        },
        "pipelines": [
            {
                "name": "customers",
                "format": "lindorm",
                "landing": (landing / "customers").as_uri(),
                "namespace": NAMESPACE,
                "keys": {"customers": ["id"]},
            },
            {
                "name": "products",
                "format": "debezium-json",
                "landing": (landing / "products").as_uri(),
                "namespace": NAMESPACE,
                "keys": {"products": ["id"]},
            },
        ],
    }
    path = root / "pipelines.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_concurrently(config: Path, pipelines: list[str]) -> list[tuple[int, str, str]]:
    """Start one CLI process per pipeline at once, then wait for all; (exit, stdout, stderr)."""
    # One core and a small driver each: the machine's two cores are shared.
    env = {**os.environ, "SPARK_MASTER": "local[1]", "SPARK_DRIVER_MEMORY": "1g"}
    processes = [
        subprocess.Popen(
            [CLI, "run", "--config", str(config), "--pipeline", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in pipelines
    ]
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=600)
        results.append((process.returncode, stdout, stderr))
    return results


def assert_all_exited_zero(results: list[tuple[int, str, str]], batch: int) -> None:
    for code, stdout, stderr in results:
        errors = [ln for ln in stderr.splitlines() if "Exception" in ln or "Error" in ln]
        assert code == 0, f"exit {code}:\n{stdout}\n" + "\n".join(errors[:8]) + stderr[-2000:]
        assert f"batch {batch}" in stdout, stdout


@pytest.mark.slow
def test_two_pipelines_write_one_postgresql_catalog_concurrently(spark, tmp_path, catalog_uri):
    from cdc_ingest.config import load_config
    from cdc_ingest.spark_session import configure_catalog
    from pyiceberg.catalog.sql import SqlCatalog

    config_path = write_pipelines(tmp_path, catalog_uri)
    pipelines = ["customers", "products"]
    # Round 1 races to create the namespace, the shared _cdc_ tables and each mirror.
    assert_all_exited_zero(run_concurrently(config_path, pipelines), batch=1)
    # Round 2 commits concurrently to tables that exist: MERGEs and the shared checkpoints.
    products_before = debezium_final_rows(DEBEZIUM_FILE)
    deleted_id = products_before[0]["id"]
    landing = tmp_path / "landing"
    column_delete = FIXTURES / "lindorm" / "sql-column-delete.jsonl"
    (landing / "customers" / f"002-{column_delete.name}").write_bytes(column_delete.read_bytes())
    (landing / "products" / "002-delete.json").write_text(
        json.dumps(later_delete(DEBEZIUM_FILE, deleted_id)) + "\n"
    )
    assert_all_exited_zero(run_concurrently(config_path, pipelines), batch=2)

    # The column delete's `after` has no last_name: NULL afterwards.
    expected_customers = [{"id": "1004", "first_name": "Anne Marie", "last_name": None}]
    expected_products = [r for r in products_before if r["id"] != deleted_id]
    assert len(expected_products) >= 5  # the replay itself is not trivially empty
    expected_checkpoints = [(p, b) for p in pipelines for b in (1, 2)]

    # Spark, through the Iceberg JDBC catalog on PostgreSQL.
    catalog = load_config(config_path).catalog
    configure_catalog(spark, catalog)

    def spark_rows(table: str, *columns: str) -> list[dict[str, Any]]:
        df = spark.table(f"{CATALOG}.{NAMESPACE}.{table}").select(*columns)
        return sorted((r.asDict() for r in df.collect()), key=lambda r: json.dumps(r))

    assert spark_rows("customers", "id", "first_name", "last_name") == expected_customers
    products = sorted(spark_rows("products", "id", "name"), key=lambda r: r["id"])
    assert products == [{"id": r["id"], "name": r["name"]} for r in expected_products]
    checkpoints = spark_rows("_cdc_checkpoints", "pipeline", "batch_id", "status", "file")
    committed = [(r["pipeline"], r["batch_id"]) for r in checkpoints if r["status"] == "committed"]
    assert sorted(committed) == expected_checkpoints
    applied = sorted(
        (r["pipeline"], Path(r["file"]).name) for r in checkpoints if r["status"] == "applied"
    )
    assert applied == [
        ("customers", f"001-{LINDORM_FILE.name}"),
        ("customers", f"002-{column_delete.name}"),
        ("products", f"001-{DEBEZIUM_FILE.name}"),
        ("products", "002-delete.json"),
    ]

    # pyiceberg, through SQLAlchemy and psycopg2 on the same catalog rows.
    assert catalog.sqlalchemy_url.startswith("postgresql+psycopg2://")
    lake = SqlCatalog(CATALOG, uri=catalog.sqlalchemy_url, warehouse=catalog.warehouse)
    assert sorted(lake.list_tables(NAMESPACE)) == sorted(
        (NAMESPACE, t)
        for t in (
            "customers",
            "products",
            "_cdc_batches",
            "_cdc_checkpoints",
            "_cdc_dead_letters",
            "_cdc_ddl_history",
            "_cdc_tombstones",
        )
    )
    customers = lake.load_table(f"{NAMESPACE}.customers").scan().to_arrow()
    assert customers.select(["id", "first_name", "last_name"]).to_pylist() == expected_customers
    products_read = lake.load_table(f"{NAMESPACE}.products").scan().to_arrow()
    assert sorted(products_read.column("id").to_pylist()) == [r["id"] for r in expected_products]
    rows = lake.load_table(f"{NAMESPACE}._cdc_checkpoints").scan().to_arrow().to_pylist()
    assert sorted((r["pipeline"], r["batch_id"]) for r in rows if r["status"] == "committed") == (
        expected_checkpoints
    )


def test_jdbc_drivers_come_from_the_maven_cache_after_the_iceberg_runtime():
    import pyspark
    from cdc_ingest.spark_session import job_jars

    names = [Path(j).name for j in job_jars()]
    expected = {
        "3.5": [
            "iceberg-spark-runtime-3.5_2.12-1.12.0.jar",
            "iceberg-aws-bundle-1.12.0.jar",
            "sqlite-jdbc-3.51.1.0.jar",
            "postgresql-42.7.14.jar",
            f"spark-avro_2.12-{pyspark.__version__}.jar",
        ],
        "4.1": [
            "iceberg-spark-runtime-4.1_2.13-1.12.0.jar",
            "iceberg-aws-bundle-1.12.0.jar",
            "sqlite-jdbc-3.51.1.0.jar",
            "postgresql-42.7.14.jar",
            f"spark-avro_2.13-{pyspark.__version__}.jar",
        ],
    }
    assert names == expected[pyspark.__version__[:3]]
