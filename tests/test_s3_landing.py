"""An S3 landing zone, served by a real S3 endpoint (moto's server) on loopback."""

from __future__ import annotations

import gzip
import socket

import pytest
from formats_under_test import FORMATS, TABLE, Changes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def s3_endpoint(monkeypatch):
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    yield endpoint
    server.stop()


def test_files_landed_on_s3_plain_and_gzipped_are_applied_once(lake, s3_endpoint):
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="landing")
    c = Changes("debezium-json")
    first = c.insert({"id": 1, "owner": "a", "balance": 1}, 1000) + "\n"
    second = c.update(
        {"id": 1, "owner": "a", "balance": 1}, {"id": 1, "owner": "a", "balance": 2}, 2000
    )
    s3.put_object(Bucket="landing", Key="accounts/2026/001.jsonl", Body=first.encode())
    s3.put_object(
        Bucket="landing", Key="accounts/2026/002.jsonl.gz", Body=gzip.compress(second.encode())
    )
    s3.put_object(Bucket="landing", Key="accounts/2026/_SUCCESS", Body=b"")
    lake.pipelines = [
        {
            "name": "accounts",
            "format": "debezium-json",
            "landing": "s3://landing/accounts",
            "namespace": "ods",
            **FORMATS["debezium-json"]["options"],
        }
    ]
    lake.write_config()
    summary = lake.run("accounts")
    assert summary.files == [
        "s3://landing/accounts/2026/001.jsonl",
        "s3://landing/accounts/2026/002.jsonl.gz",
    ]
    assert (summary.lines, summary.messages) == (2, 2)
    assert lake.rows(TABLE, "id", "balance") == [{"id": 1, "balance": 2}]
    assert lake.run("accounts").batch_id is None


def test_a_planned_object_overwritten_or_deleted_before_it_is_read_is_left_out(lake, s3_endpoint):
    import boto3
    from cdc_ingest.landing.zones import LandingError, list_landed, read_bytes
    from cdc_ingest.state.checkpoints import CheckpointStore
    from cdc_ingest.writers.spark_writer import SparkWriter

    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="landing")
    c = Changes("debezium-json")

    def put(name: str, *ids: int) -> None:
        body = "".join(
            c.insert({"id": k, "owner": "a", "balance": k}, 1000 + k) + "\n" for k in ids
        )
        s3.put_object(Bucket="landing", Key=f"accounts/{name}", Body=body.encode())

    put("000.jsonl", 100)
    lake.pipelines = [
        {
            "name": "accounts",
            "format": "debezium-json",
            "landing": "s3://landing/accounts",
            "namespace": "ods",
            **FORMATS["debezium-json"]["options"],
        }
    ]
    lake.write_config()
    lake.run("accounts")
    put("001.jsonl", 1, 2)
    put("002.jsonl", 3, 4)
    put("003.jsonl", 5)
    writer = SparkWriter(lake.spark, lake.catalog)
    store = CheckpointStore(lake.spark, lake.catalog, "ods", "accounts", writer)
    plan = store.plan(list_landed("s3://landing/accounts"), store.load())
    store.record_planned(plan)  # as a run killed right after its plan commit
    # A fresh plan's objects are read only with the ETag they were listed with.
    with pytest.raises(LandingError, match=r"002\.jsonl changed after it was listed"):
        read_bytes("s3://landing/accounts/002.jsonl", etag='"0"')
    put("002.jsonl", 3)
    s3.delete_object(Bucket="landing", Key="accounts/003.jsonl")

    resumed = lake.run("accounts")

    assert resumed.resumed and list(resumed.changed_files) == ["s3://landing/accounts/002.jsonl"]
    assert resumed.missing_files == {
        "s3://landing/accounts/003.jsonl": "deleted after it was planned"
    }
    assert sorted(r["id"] for r in lake.rows(TABLE, "id")) == [1, 2, 100]
    assert lake.run("accounts").files == ["s3://landing/accounts/002.jsonl"]
    assert sorted(r["id"] for r in lake.rows(TABLE, "id")) == [1, 2, 3, 100]
