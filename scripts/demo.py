"""`make demo`: land sample dumps per format, run each pipeline's Airflow DAG, show the tables.

Everything runs on the embedded default: local Spark, an Iceberg JDBC catalog on SQLite and a local
warehouse under ./demo. Re-running the demo starts from scratch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NotRequired, TypedDict

import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "demo"
FIXTURES = REPO / "tests" / "fixtures"
SUMMARY_MARKS = (" messages -> ", "freshness:", "dead letters (", ".json", "DDL", " -> ")


class DemoPipeline(TypedDict):
    """A pipeline's pipelines.yaml entry without its landing, plus the fixture files it lands."""

    name: str
    format: str
    files: list[str]  # under tests/fixtures
    keys: NotRequired[dict[str, list[str]]]
    columns: NotRequired[dict[str, str]]
    envelope: NotRequired[str]


PIPELINES: list[DemoPipeline] = [
    {
        "name": "lindorm_customers",
        "format": "lindorm",
        "keys": {"customers": ["id"]},
        "files": [
            f"lindorm/sql-{n}.jsonl" for n in ("insert", "update", "delete", "column-delete")
        ],
    },
    {"name": "lindorm_hbase", "format": "lindorm", "files": ["lindorm/hbase-insert.jsonl"]},
    {
        "name": "arcion_region",
        "format": "arcion",
        "envelope": "kafka",
        "files": [
            f"arcion/{n}.jsonl"
            for n in ("snapshot-insert", "insert", "update", "delete", "tombstone")
        ],
    },
    {
        "name": "debezium_products",
        "format": "debezium-json",
        "keys": {"products": ["id"]},
        "files": ["debezium-json/debezium-data-schema-exclude.txt"],
    },
    # OceanBase OMS: the seed's samples as published. Several are dead letters on purpose
    # (trailing commas, 1000-digit numbers, decimals beyond 38 digits): the demo shows why.
    {
        "name": "oms_default",
        "format": "oms-default",
        "keys": {"table_name": ["col1", "col2"]},
        "files": [
            "oms-default/insert.jsonl",
            "oms-default/insert-without-trailing-comma.jsonl",
            "oms-default/update-without-trailing-comma.jsonl",
        ],
    },
    {
        "name": "oms_default_extend",
        "format": "oms-default-extend",
        "keys": {"table": ["col1", "col2"]},
        "files": [f"oms-default-extend/{n}.jsonl" for n in ("insert", "update")],
    },
    {
        "name": "oms_canal",
        "format": "oms-canal",
        "keys": {"table": ["col1"]},
        "files": [f"oms-canal/{n}.jsonl" for n in ("insert", "update")],
    },
    {
        "name": "oms_dataworks",
        "format": "oms-dataworks",
        "keys": {"tab": ["col1", "col2"]},
        "files": [f"oms-dataworks/{n}.jsonl" for n in ("insert", "heartbeat")],
    },
    {
        "name": "oms_shareplex",
        "format": "oms-shareplex",
        "keys": {"mock_table": ["col14", "col6"]},
        "files": [f"oms-shareplex/{n}.jsonl" for n in ("insert", "update")],
    },
    # DataHub Tuple: the seed's INSERT and UPDATE pair (lines 1-3; line 4 would delete the row).
    {
        "name": "datahub_tuple",
        "format": "datahub-tuple",
        "keys": {"t_shiyu_pk": ["id", "name"]},
        "columns": {"id": "BIGINT", "name": "STRING", "comment": "STRING"},
        "files": ["datahub-tuple/insert-update-delete.jsonl#1-3"],
    },
    {
        "name": "datahub_blob",
        "format": "datahub-blob",
        "files": [
            f"datahub-blob/{n}.jsonl"
            for n in ("insert", "update-before", "update-after", "heartbeat", "alter")
        ],
    },
    {"name": "aerospike", "format": "aerospike", "files": ["aerospike/write.jsonl"]},
    # Schema change mid-stream: rows, then an ALTER TABLE ADD COLUMN, then rows that fill it.
    {
        "name": "canal_schema_change",
        "format": "canal-json",
        "files": ["canal-json/schema-change.jsonl"],
    },
]


def main() -> int:
    """Write the demo lake, run the DAGs, print the tables."""
    shutil.rmtree(DEMO, ignore_errors=True)
    pipelines: list[dict[str, object]] = []
    for spec in PIPELINES:
        landing = DEMO / "landing" / spec["name"]
        landing.mkdir(parents=True)
        for i, entry in enumerate(spec["files"], start=1):
            # "file#2-3" lands lines 2 to 3 of a fixture only.
            name, _, span = entry.partition("#")
            lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines(keepends=True)
            first, _, last = span.partition("-")
            chosen = lines[int(first) - 1 : int(last)] if span else lines
            (landing / f"{i:04d}-{Path(name).stem}.jsonl").write_text("".join(chosen))
        pipeline = {k: v for k, v in spec.items() if k != "files"}
        pipeline.update(
            landing=landing.as_uri(), namespace="ods_" + spec["name"], schedule="*/5 * * * *"
        )
        pipelines.append(pipeline)
    catalog = {
        "name": "lake",
        "uri": f"sqlite:///{DEMO / 'catalog.db'}",
        "warehouse": (DEMO / "warehouse").as_uri(),
    }
    config = {"catalog": catalog, "pipelines": pipelines}
    config_path = DEMO / "pipelines.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(DEMO / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "CDC_INGEST_CONFIG": str(config_path),
        "AIRFLOW_CONN_SPARK_LOCAL": '{"conn_type":"spark","host":"local[2]"}',
        "PYSPARK_PYTHON": sys.executable,
    }
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, stdout=subprocess.DEVNULL)
    for p in pipelines:
        print(f"\n=== airflow dags test ingest_{p['name']}", flush=True)
        done = subprocess.run(
            [airflow, "dags", "test", f"ingest_{p['name']}"],
            env=env,
            capture_output=True,
            text=True,
        )
        summary = [
            ln
            for ln in done.stdout.splitlines() + done.stderr.splitlines()
            if "pipeline " in ln or any(mark in ln for mark in SUMMARY_MARKS)
        ]
        print("\n".join(summary[-12:]))
        if done.returncode != 0:
            print(done.stdout[-4000:], done.stderr[-4000:], sep="\n")
            return done.returncode
    show_tables(catalog, pipelines)
    return 0


def show_tables(catalog: dict[str, str], pipelines: list[dict[str, object]]) -> None:
    """Print every table of every pipeline's namespace, read back with pyiceberg."""
    from pyiceberg.catalog.sql import SqlCatalog

    lake = SqlCatalog(catalog["name"], uri=catalog["uri"], warehouse=catalog["warehouse"])
    for p in pipelines:
        for identifier in sorted(lake.list_tables(str(p["namespace"]))):
            rows = lake.load_table(identifier).scan().to_arrow().to_pylist()
            print(f"\n{'.'.join(identifier)}: {len(rows)} rows")
            for row in rows[:10]:
                print("  ", {k: v for k, v in row.items() if k not in ("raw", "summary")})


if __name__ == "__main__":
    sys.exit(main())
