"""S3 landing zones with real credentials: moto's server on loopback, with IAM authentication on.

Requests signed with an unknown key or a wrong secret are refused by the server, so these tests
show which credentials actually reach the listing, the job's driver and its Python workers.
"""

from __future__ import annotations

import json
import socket
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import pytest
import requests
from airflow_runner import airflow, airflow_env, migrate, require_stack, tail, task_states
from formats_under_test import FORMATS, TABLE, Changes

BUCKET = "landing"


@dataclass(frozen=True)
class AuthedS3:
    """A loopback S3 endpoint that checks signatures, and a key pair it accepts."""

    endpoint: str
    access_key_id: str
    secret_access_key: str


class _ClientArgs(TypedDict):
    """Where and as whom a boto3 client connects (typed so the client's overloads resolve)."""

    endpoint_url: str
    region_name: str
    aws_access_key_id: str
    aws_secret_access_key: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def authed_s3() -> Iterator[AuthedS3]:
    """Moto's server with one IAM user allowed s3:*, a bucket, then authentication switched on."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    # Moto's accounts live in this process, not in the server: start from none.
    requests.post(f"{endpoint}/moto-api/reset", timeout=10).raise_for_status()
    setup: _ClientArgs = {
        "endpoint_url": endpoint,
        "region_name": "us-east-1",
        "aws_access_key_id": "setup",
        "aws_secret_access_key": "setup",
    }
    iam = boto3.client("iam", **setup)
    iam.create_user(UserName="lander")
    iam.put_user_policy(
        UserName="lander",
        PolicyName="s3",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
            }
        ),
    )
    key = iam.create_access_key(UserName="lander")["AccessKey"]
    boto3.client("s3", **setup).create_bucket(Bucket=BUCKET)
    # From here on every request must be signed with a known key and its secret.
    requests.post(f"{endpoint}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
    try:
        yield AuthedS3(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        requests.post(f"{endpoint}/moto-api/reset-auth", data=b"inf", timeout=10)
        requests.post(f"{endpoint}/moto-api/reset", timeout=10)
        server.stop()


def _land(s3: AuthedS3) -> None:
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        region_name="us-east-1",
        aws_access_key_id=s3.access_key_id,
        aws_secret_access_key=s3.secret_access_key,
    )
    c = Changes("debezium-json")
    lines = [
        c.insert({"id": 1, "owner": "a", "balance": 1}, 1000),
        c.insert({"id": 2, "owner": "b", "balance": 5}, 1001),
        c.update(
            {"id": 1, "owner": "a", "balance": 1}, {"id": 1, "owner": "a", "balance": 2}, 2000
        ),
    ]
    client.put_object(Bucket=BUCKET, Key="accounts/001.jsonl", Body="\n".join(lines).encode())


def _pipeline(**extra: str) -> dict[str, object]:
    return {
        "name": "accounts",
        "format": "debezium-json",
        "landing": f"s3://{BUCKET}/accounts",
        "namespace": "ods",
        **FORMATS["debezium-json"]["options"],
        **extra,
    }


def test_python_workers_read_with_the_drivers_credentials(lake, authed_s3, monkeypatch):
    """The suite's Spark workers started with the key 'testing', which this server refuses."""
    _land(authed_s3)
    monkeypatch.setenv("AWS_ENDPOINT_URL", authed_s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", authed_s3.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", authed_s3.secret_access_key)
    lake.pipelines = [_pipeline()]
    lake.write_config()
    summary = lake.run("accounts")
    assert (summary.lines, summary.messages) == (3, 3)
    assert lake.rows(TABLE, "id", "balance") == [{"id": 1, "balance": 2}, {"id": 2, "balance": 5}]


def test_wrong_secret_fails_the_listing_naming_zone_endpoint_and_source(
    lake, authed_s3, monkeypatch
):
    from cdc_ingest.landing.zones import LandingError

    _land(authed_s3)
    monkeypatch.setenv("AWS_ENDPOINT_URL", authed_s3.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", authed_s3.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    lake.pipelines = [_pipeline()]
    lake.write_config()
    with pytest.raises(LandingError) as raised:
        lake.run("accounts")
    message = str(raised.value)
    assert message.startswith(
        f"landing zone s3://{BUCKET}/accounts cannot be listed at {authed_s3.endpoint} with the "
        "credentials of the standard AWS environment variables: "
    ), message
    assert "SignatureDoesNotMatch" in message and "not-the-secret" not in message


def _connection(s3: AuthedS3, secret: str) -> str:
    return json.dumps(
        {
            "conn_type": "aws",
            "login": s3.access_key_id,
            "password": secret,
            "extra": {
                "endpoint_url": s3.endpoint,
                "region_name": "us-east-1",
                "config_kwargs": {"s3": {"addressing_style": "path"}},
            },
        }
    )


@pytest.mark.slow
def test_dags_test_reads_s3_through_an_airflow_aws_connection(tmp_path: Path, authed_s3) -> None:
    require_stack()
    _land(authed_s3)
    catalog_uri = f"sqlite:///{tmp_path}/catalog.db"
    warehouse = f"file://{tmp_path}/warehouse"
    config = tmp_path / "pipelines.yaml"
    pipeline = {**_pipeline(aws_conn_id="s3_landing"), "retries": 0}
    config.write_text(
        textwrap.dedent(
            f"""\
            catalog: {{name: lake, uri: "{catalog_uri}", warehouse: "{warehouse}"}}
            pipelines:
              - {json.dumps(pipeline)}
            """
        ),
        encoding="utf-8",
    )
    home = tmp_path / "airflow"
    # No AWS variables at all: only the connection can reach the endpoint.
    env = airflow_env(home, config)
    migrate(env, tmp_path)

    wrong = {**env, "AIRFLOW_CONN_S3_LANDING": _connection(authed_s3, "not-the-secret")}
    refused = airflow(["dags", "test", "ingest_accounts"], wrong, tmp_path)
    output = refused.stdout + refused.stderr
    assert (
        f"landing zone s3://{BUCKET}/accounts cannot be listed at {authed_s3.endpoint} with the "
        "credentials of Airflow connection 's3_landing': An error occurred (SignatureDoesNotMatch)"
    ) in output, tail(refused)
    assert "not-the-secret" not in output
    [states] = task_states(home).values()
    assert states["check_landing"] == "failed", states
    assert "ingest_job.py run --config" not in output

    right = {**env, "AIRFLOW_CONN_S3_LANDING": _connection(authed_s3, authed_s3.secret_access_key)}
    run = airflow(["dags", "test", "ingest_accounts"], right, tmp_path)
    output = run.stdout + run.stderr
    finished = [line for line in output.splitlines() if "DagRun Finished" in line]
    assert finished and "state=success" in finished[-1], tail(run)
    assert "ingest_job.py run --config" in output, tail(run)
    # The connection's secret is masked in the task logs.
    assert authed_s3.secret_access_key not in output

    from pyiceberg.catalog.sql import SqlCatalog

    table = SqlCatalog("lake", uri=catalog_uri, warehouse=warehouse).load_table(f"ods.{TABLE}")
    rows = table.scan(selected_fields=("id", "balance")).to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [
        {"id": 1, "balance": 2},
        {"id": 2, "balance": 5},
    ]
