"""A real Iceberg REST catalog server on loopback: Apache Iceberg's own ``RESTCatalogServer``.

It is the server behind the ``apache/iceberg-rest-fixture`` image: Iceberg's reference REST
adapter over a JDBC catalog (SQLite here), in Jetty. Maven Central publishes its classes but not
the image's shaded jar, so ``make install`` resolves them with their dependencies
(``python tests/rest_catalog_server.py``) and the tests start ``java -cp <dir>/*``.

The server is configured like the image, through ``CATALOG_*`` variables (``CATALOG_WAREHOUSE``,
``CATALOG_IO__IMPL``, ``CATALOG_S3_ENDPOINT``...: ``__`` is ``-``, ``_`` is ``.``); its metadata
and the clients' data files go to the same warehouse (an S3 server on loopback in the tests).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "jobs"))

from cdc_ingest.jars import Artifact, jars_dir, resolve  # noqa: E402
from lakehouses import free_port  # noqa: E402

# The newest Iceberg release that publishes the REST fixture (1.12.0 does not); the REST protocol
# is what the 1.12.0 client speaks to it.
SERVER_ICEBERG = "1.11.0"
JETTY = "12.1.5"
SERVER_ARTIFACTS = (
    Artifact("org.apache.iceberg", "iceberg-open-api", SERVER_ICEBERG, "test-fixtures"),
    Artifact("org.apache.iceberg", "iceberg-core", SERVER_ICEBERG),
    Artifact("org.apache.iceberg", "iceberg-core", SERVER_ICEBERG, "tests"),
    Artifact("org.apache.iceberg", "iceberg-aws", SERVER_ICEBERG),
    Artifact("org.apache.iceberg", "iceberg-aws-bundle", SERVER_ICEBERG),
    Artifact("org.eclipse.jetty.ee10", "jetty-ee10-servlet", JETTY),
    Artifact("org.eclipse.jetty.compression", "jetty-compression-server", JETTY),
    Artifact("org.eclipse.jetty.compression", "jetty-compression-gzip", JETTY),
    # Iceberg's catalogs take a Hadoop Configuration even when no Hadoop FileIO is used.
    Artifact("org.apache.hadoop", "hadoop-client-api", "3.4.1"),
    Artifact("org.apache.hadoop", "hadoop-client-runtime", "3.4.1"),
    Artifact("org.xerial", "sqlite-jdbc", "3.51.1.0"),
    Artifact("org.slf4j", "slf4j-simple", "2.0.17"),
)
MAIN_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"
START_TIMEOUT_S = 60.0


def server_dir() -> Path:
    """Where the server's jars are resolved: beside the job's."""
    return jars_dir().parent / "rest-catalog-server"


def jars_of_server() -> Path:
    """The server's jars (``make install`` resolves them)."""
    jars = server_dir()
    if not jars.is_dir():
        raise RuntimeError(f"{jars} missing: run `make install`")
    return jars


@dataclass(frozen=True)
class RestCatalogServer:
    """A running server: its base URI and log file."""

    uri: str
    log: Path


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"REST catalog server exited:\n{log.read_text()[-3000:]}")
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"REST catalog server not listening after {START_TIMEOUT_S}s")


def _start(
    root: Path, warehouse: str, properties: Mapping[str, str], port: int, log: Path
) -> subprocess.Popen[bytes]:
    config = {
        "uri": f"jdbc:sqlite:{root / 'rest-backend.db'}",
        "warehouse": warehouse,
        "rest.port": str(port),
        **properties,
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("CATALOG_")}
    for key, value in config.items():
        env["CATALOG_" + key.replace("-", "__").replace(".", "_").upper()] = value
    with log.open("wb") as sink:
        return subprocess.Popen(
            ["java", "-Xmx512m", "-cp", f"{jars_of_server()}/*", MAIN_CLASS],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )


@contextmanager
def rest_catalog_server(
    root: Path, warehouse: str, properties: Mapping[str, str]
) -> Iterator[RestCatalogServer]:
    """Run a server whose backend is a SQLite catalog under ``root``.

    Args:
        root: a scratch directory for the catalog database and the log.
        warehouse: the backend's warehouse location (``s3://...`` or ``file://...``).
        properties: more backend catalog properties (``s3.endpoint``...), in Iceberg's names.
    """
    jars_of_server()  # missing jars: say so before any attempt
    log = root / "rest-catalog-server.log"
    # The port is free when chosen but taken before the server binds it now and then (another
    # worker's Spark): a server that could not bind it is started again on another.
    for attempt in range(3):
        port = free_port()
        process = _start(root, warehouse, properties, port, log)
        try:
            _wait_listening(port, process, log)
            break
        except RuntimeError:
            if process.poll() is None:
                process.kill()
            process.wait()
            if attempt == 2 or "Address already in use" not in log.read_text():
                raise
    try:
        yield RestCatalogServer(uri=f"http://127.0.0.1:{port}", log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    print("\n".join(resolve(SERVER_ARTIFACTS, server_dir(), transitive=True)))
