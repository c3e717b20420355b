"""The demo's pipelines: one per vendor format, each landing the fixture files named here."""

from __future__ import annotations

from typing import NotRequired, TypedDict


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
    # SeaTunnel's Maxwell and GoldenGate samples: inserts, updates and deletes of two tables.
    {
        "name": "maxwell_products",
        "format": "maxwell-json",
        "files": ["conformance/seatunnel/maxwell-data-filter-table.txt"],
    },
    {
        "name": "ogg_products",
        "format": "ogg-json",
        "files": ["conformance/seatunnel/ogg-data-filter-table.txt"],
    },
    # Schema change mid-stream: rows, then an ALTER TABLE ADD COLUMN, then rows that fill it.
    {
        "name": "canal_schema_change",
        "format": "canal-json",
        "files": ["canal-json/schema-change.jsonl"],
    },
]

# The table a downstream DAG of the demo is scheduled on (its asset, see cdc_ingest_airflow.assets).
DOWNSTREAM_TABLE = ("canal_schema_change", "orders")
