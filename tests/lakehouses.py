"""Where a test's lake lives: the warehouse and catalog kinds every semantic scenario runs on.

- ``jdbc+file``: a SQLite catalog file and a local warehouse (the embedded default);
- ``rest+s3``: Apache Iceberg's REST catalog server (:mod:`rest_catalog_server`) over an ``s3://``
  warehouse on a real S3 endpoint, moto's server, both on loopback.

A test takes ``lake`` as usual and runs on every kind with
``@pytest.mark.parametrize("lake", LAKEHOUSES, indirect=True)``; without it, on ``jdbc+file``.
The S3 server starts once per test process; each ``rest+s3`` lake has its own REST server (a
catalog's namespaces are shared by all its clients) and its own bucket prefix.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

JDBC_FILE = "jdbc+file"
REST_S3 = "rest+s3"
LAKEHOUSES = [JDBC_FILE, REST_S3]
WAREHOUSE_BUCKET = "warehouse"
S3_REGION = "us-east-1"
# moto accepts any key pair unless IAM authentication is switched on.
S3_KEY_ID = "testing"
S3_SECRET = "testing"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=S3_REGION,
            aws_access_key_id=S3_KEY_ID,
            aws_secret_access_key=S3_SECRET,
        )

    def ensure_bucket(self, bucket: str) -> None:
        client = self.client()
        if bucket not in [b["Name"] for b in client.list_buckets().get("Buckets", [])]:
            client.create_bucket(Bucket=bucket)

    def file_io_properties(self) -> dict[str, str]:
        """S3FileIO settings for this endpoint, in Iceberg's names (keys: the AWS variables)."""
        return {
            "s3.endpoint": self.endpoint,
            "s3.path-style-access": "true",
            "client.region": S3_REGION,
        }


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A real S3 endpoint on loopback for the whole test process, with the warehouse bucket."""
    from moto.server import ThreadedMotoServer

    # One log line per request would bury a failing test's report.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    s3 = S3Server(f"http://127.0.0.1:{port}")
    s3.ensure_bucket(WAREHOUSE_BUCKET)
    yield s3
    server.stop()


def rest_s3_catalog(
    root: Path, name: str, s3: S3Server, stack: Any, properties: dict[str, str] | None = None
) -> dict[str, Any]:
    """Start a REST catalog server over ``s3://warehouse/<root name>`` and return the pipelines
    file's ``catalog`` section that reaches it; the server stops when ``stack`` closes."""
    from rest_catalog_server import rest_catalog_server

    # Other tests of this process reset moto's shared backend (tests/test_s3_connection.py).
    s3.ensure_bucket(WAREHOUSE_BUCKET)
    warehouse = f"s3://{WAREHOUSE_BUCKET}/{root.name}"
    server = stack.enter_context(
        rest_catalog_server(
            root,
            warehouse,
            {
                "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
                "s3.access-key-id": S3_KEY_ID,
                "s3.secret-access-key": S3_SECRET,
                **s3.file_io_properties(),
            },
        )
    )
    return {
        "name": name,
        "type": "rest",
        "uri": server.uri,
        "warehouse": warehouse,
        "properties": {**s3.file_io_properties(), **(properties or {})},
    }
