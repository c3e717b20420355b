"""Catalog kinds (jdbc, rest, glue, hive) and where their settings and secrets come from.

The expected properties below are written out by hand from Iceberg's and pyiceberg's documented
property names; the REST + S3 cases run against the real servers of lakehouses.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from cdc_ingest.catalog.properties import (
    pyiceberg_properties,
    secret_values,
    spark_catalog_conf,
)
from cdc_ingest.config import CatalogConfig, ConfigError, load_config
from formats_under_test import FORMATS, TABLE, Changes
from lakehouses import REST_S3, S3Server, rest_s3_catalog

# Their CLI runs and DAG tasks run on the worker's warm engine (conftest.warm_engine).
pytestmark = pytest.mark.usefixtures("warm_engine")

REPO = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, catalog: str) -> Path:
    path = tmp_path / "pipelines.yaml"
    pipeline = "pipelines:\n  - {name: p, format: lindorm, landing: 'file:///l', namespace: ods}\n"
    path.write_text("catalog:\n" + textwrap.indent(textwrap.dedent(catalog), "  ") + pipeline)
    return path


@pytest.mark.parametrize(
    ("catalog", "message"),
    [
        (
            "type: nessie\nuri: http://x\nwarehouse: s3://b/w\n",
            "catalog.type: 'nessie' must be one of",
        ),
        ("type: rest\nwarehouse: s3://b/w\n", "missing required key 'uri'"),
        ("type: hive\nwarehouse: s3://b/w\n", "missing required key 'uri'"),
        ("uri: sqlite:////c.db\nwarehouse: /w\n", "must be a file:// or s3:// URI"),
        ("uri: sqlite:////c.db\nwarehouse: file:///w\nwarehous: x\n", "unknown key 'warehous'"),
        (
            "type: rest\nuri: http://x\nproperties: {credential: 'id:secret'}\n",
            "'credential' is a secret; give it through catalog.conn_id",
        ),
        (
            "type: glue\nwarehouse: s3://b/w\nproperties: {s3.secret-access-key: k}\n",
            "'s3.secret-access-key' is a secret",
        ),
    ],
)
def test_catalog_section_errors_name_the_key(tmp_path, catalog, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, catalog))


def test_glue_and_hive_pass_through_and_rest_may_name_its_warehouse(tmp_path):
    glue = load_config(write(tmp_path, "type: glue\nwarehouse: s3://b/w\n")).catalog
    assert spark_catalog_conf(glue, {}) == {
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "glue",
        "spark.sql.catalog.lake.warehouse": "s3://b/w",
        "spark.sql.catalog.lake.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "spark.sql.catalog.lake.cache-enabled": "false",
    }
    hive = load_config(write(tmp_path, "type: hive\nuri: thrift://hms:9083\nwarehouse: s3://b/w\n"))
    assert pyiceberg_properties(hive.catalog, {}) == {
        "type": "hive",
        "uri": "thrift://hms:9083",
        "warehouse": "s3://b/w",
    }
    rest = load_config(write(tmp_path, "type: rest\nuri: https://polaris/api\nwarehouse: prod\n"))
    assert pyiceberg_properties(rest.catalog, {}) == {
        "type": "rest",
        "uri": "https://polaris/api",
        "warehouse": "prod",
    }


def test_rest_over_s3_properties_for_both_engines_with_secrets_from_the_environment(tmp_path):
    catalog = load_config(
        write(
            tmp_path,
            """\
            name: lake
            type: rest
            uri: https://catalog.example/api/catalog
            warehouse: s3://lakehouse/prod
            properties:
              scope: PRINCIPAL_ROLE:ALL
              s3.path-style-access: "false"
            """,
        )
    ).catalog
    environ = {
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-1",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "PYICEBERG_CATALOG__LAKE__CREDENTIAL": "client-1:client-secret-1",
        "PYICEBERG_CATALOG__OTHER__TOKEN": "not-this-catalogs",
    }
    assert spark_catalog_conf(catalog, environ) == {
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "rest",
        "spark.sql.catalog.lake.warehouse": "s3://lakehouse/prod",
        "spark.sql.catalog.lake.uri": "https://catalog.example/api/catalog",
        "spark.sql.catalog.lake.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "spark.sql.catalog.lake.client.region": "eu-west-1",
        "spark.sql.catalog.lake.s3.access-key-id": "AKIAEXAMPLE",
        "spark.sql.catalog.lake.s3.secret-access-key": "aws-secret-1",
        "spark.sql.catalog.lake.scope": "PRINCIPAL_ROLE:ALL",
        "spark.sql.catalog.lake.s3.path-style-access": "false",
        "spark.sql.catalog.lake.credential": "client-1:client-secret-1",
        "spark.sql.catalog.lake.cache-enabled": "false",
    }
    assert pyiceberg_properties(catalog, environ) == {
        "type": "rest",
        "warehouse": "s3://lakehouse/prod",
        "uri": "https://catalog.example/api/catalog",
        "client.region": "eu-west-1",
        "s3.region": "eu-west-1",
        "s3.access-key-id": "AKIAEXAMPLE",
        "s3.secret-access-key": "aws-secret-1",
        "s3.force-virtual-addressing": "true",
        "scope": "PRINCIPAL_ROLE:ALL",
        "credential": "client-1:client-secret-1",
    }
    assert set(secret_values(catalog, environ)) == {
        "aws-secret-1",
        "client-1:client-secret-1",
        "client-secret-1",
    }


def test_jdbc_password_from_the_environment_reaches_both_engines():
    catalog = CatalogConfig("lake", "postgresql://cdc@db.internal:5432/iceberg", "s3://b/w")
    environ = {"PYICEBERG_CATALOG__LAKE__JDBC__PASSWORD": "p@ss/word"}
    spark = spark_catalog_conf(catalog, environ)
    assert spark["spark.sql.catalog.lake.uri"] == "jdbc:postgresql://db.internal:5432/iceberg"
    assert spark["spark.sql.catalog.lake.jdbc.user"] == "cdc"
    assert spark["spark.sql.catalog.lake.jdbc.password"] == "p@ss/word"
    assert pyiceberg_properties(catalog, environ)["uri"] == (
        "postgresql+psycopg2://cdc:p%40ss%2Fword@db.internal:5432/iceberg"
    )
    assert secret_values(catalog, environ) == ["p@ss/word"]


def test_airflow_connections_become_catalog_properties_and_are_masked(monkeypatch, airflow_home):
    from cdc_ingest_airflow.aws_connection import catalog_environment

    monkeypatch.setenv(
        "AIRFLOW_CONN_REST_CATALOG",
        json.dumps({"conn_type": "generic", "login": "client-7", "password": "rest-secret-7"}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_TOKEN_CATALOG",
        json.dumps({"conn_type": "generic", "extra": {"token": "bearer-token-7"}}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_WAREHOUSE",
        json.dumps(
            {
                "conn_type": "aws",
                "login": "AKIA7",
                "password": "warehouse-secret-7",
                "extra": {"endpoint_url": "http://minio:9000", "region_name": "us-east-1"},
            }
        ),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_PG", json.dumps({"conn_type": "postgres", "login": "cdc", "password": "pg-7"})
    )
    rest = CatalogConfig(
        "lake", "http://rest", "s3://b/w", "rest", conn_id="rest_catalog", aws_conn_id="warehouse"
    )
    assert catalog_environment(rest) == {
        "PYICEBERG_CATALOG__LAKE__CREDENTIAL": "client-7:rest-secret-7",
        "PYICEBERG_CATALOG__LAKE__S3__ENDPOINT": "http://minio:9000",
        "PYICEBERG_CATALOG__LAKE__CLIENT__REGION": "us-east-1",
        "PYICEBERG_CATALOG__LAKE__S3__ACCESS_KEY_ID": "AKIA7",
        "PYICEBERG_CATALOG__LAKE__S3__SECRET_ACCESS_KEY": "warehouse-secret-7",
        "PYICEBERG_CATALOG__LAKE__S3__PATH_STYLE_ACCESS": "true",
    }
    token = CatalogConfig("lake", "http://rest", "", "rest", conn_id="token_catalog")
    assert catalog_environment(token) == {"PYICEBERG_CATALOG__LAKE__TOKEN": "bearer-token-7"}
    jdbc = CatalogConfig("lake", "postgresql://db/iceberg", "file:///w", conn_id="pg")
    assert catalog_environment(jdbc) == {
        "PYICEBERG_CATALOG__LAKE__JDBC__USER": "cdc",
        "PYICEBERG_CATALOG__LAKE__JDBC__PASSWORD": "pg-7",
    }
    from airflow.sdk._shared.secrets_masker import redact

    assert "rest-secret-7" not in str(redact("credential client-7:rest-secret-7"))
    assert "warehouse-secret-7" not in str(redact("key warehouse-secret-7"))


@pytest.mark.parametrize("lake", [REST_S3], indirect=True)
def test_pyiceberg_readers_see_a_rest_catalog_over_s3(lake):
    from cdc_ingest_airflow.lake_state import batch_summary, pending
    from cdc_ingest_airflow.pipeline_status import gather

    c = Changes("debezium-json")
    landing = lake.add_pipeline("accounts", "debezium-json", **FORMATS["debezium-json"]["options"])
    lake.land("accounts", "001.json", [c.insert({"id": 1, "owner": "a", "balance": 5}, 1000)])
    lake.run("accounts")
    second = lake.land("accounts", "002.json", [c.delete({"id": 1, "owner": "a"}, 2000)])

    config = load_config(lake.config_path)
    assert pending(config, "accounts").files == [second.as_uri()]
    summary = batch_summary(str(lake.config_path), "accounts", run_id="manual")
    assert summary["batch_id"] is None  # no row recorded under this run id
    overview = gather(str(lake.config_path))
    [status] = overview.pipelines
    assert status.problems == [] and overview.error is None
    assert (status.pending_count, status.pending_files) == (1, [second.as_uri()])
    [table] = [t for t in status.tables if t.name == TABLE]
    assert (table.exists, table.rows, table.inserted) == (True, 1, 1)
    assert overview.catalog == f"{lake.catalog} at {lake.catalog_section['uri']}"
    assert (landing / "001.json").is_file()


def _one_landed_file(root: Path, catalog: dict[str, Any]) -> Path:
    """A pipelines file for ``catalog`` whose pipeline ``accounts`` has one insert landed."""
    landing = root / "landing"
    landing.mkdir()
    c = Changes("debezium-json")
    (landing / "001.json").write_text(c.insert({"id": 1, "owner": "a", "balance": 5}, 1) + "\n")
    pipeline = {
        "name": "accounts",
        "format": "debezium-json",
        "landing": landing.as_uri(),
        "namespace": "ods",
        **FORMATS["debezium-json"]["options"],
    }
    config = root / "pipelines.yaml"
    config.write_text(yaml.safe_dump({"catalog": catalog, "pipelines": [pipeline]}))
    return config


def _cli(config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    application = str(REPO / "jobs" / "cdc_ingest" / "application" / "ingest_job.py")
    return subprocess.run(
        [sys.executable, application, "run", "--config", str(config), "--pipeline", "accounts"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("key", "value"),
    [("CREDENTIAL", "cdc-ingest:{secret}"), ("TOKEN", "{secret}")],
    ids=["oauth2-client-credentials", "bearer-token"],
)
def test_rest_secret_never_printed_by_a_run_that_succeeds_or_fails(
    tmp_path: Path, s3_server: S3Server, key: str, value: str
) -> None:
    import os

    secret = "rest-secret-never-printed-31b"
    env = {
        **os.environ,
        f"PYICEBERG_CATALOG__LAKE__{key}": value.format(secret=secret),
        "PYTHONPATH": str(REPO / "jobs"),
    }
    with ExitStack() as stack:
        catalog = rest_s3_catalog(tmp_path, "lake", s3_server, stack)
        config = _one_landed_file(tmp_path, catalog)
        ok = _cli(config, env)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "inserted" in ok.stdout
    # The REST server is gone: the run fails at the catalog, in one line, with status 2.
    failed = _cli(config, env)
    assert failed.returncode == 2, failed.stderr[-3000:]
    ours = [line for line in failed.stderr.splitlines() if line.startswith("cdc-ingest:")]
    assert len(ours) == 1 and "catalog or engine failure" in ours[0], failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr
    for run in (ok, failed):
        assert secret not in run.stdout + run.stderr


@pytest.mark.slow
def test_an_unreachable_postgresql_catalog_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import os

    from lakehouses import free_port

    secret = "pg-password-never-printed-77"
    catalog = {
        "name": "lake",
        # Nothing listens on this port.
        "uri": f"postgresql://cdc:{secret}@127.0.0.1:{free_port()}/iceberg",
        "warehouse": (tmp_path / "warehouse").as_uri(),
    }
    config = _one_landed_file(tmp_path, catalog)

    failed = _cli(config, {**os.environ, "PYTHONPATH": str(REPO / "jobs")})

    assert failed.returncode == 2, failed.stderr[-3000:]
    ours = [line for line in failed.stderr.splitlines() if line.startswith("cdc-ingest:")]
    assert len(ours) == 1 and "catalog or engine failure: OperationalError" in ours[0], ours
    assert "Traceback" not in failed.stderr
    assert secret not in failed.stdout + failed.stderr
