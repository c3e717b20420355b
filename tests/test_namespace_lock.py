"""The namespace lock on both catalog databases: SQLite (a file lock) and PostgreSQL (advisory).

Each ``namespace_lock`` opens its own file handle or database session, so two of them in one
process contend exactly as two jobs do.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from postgres_server import PostgresServer, serve_module

SHORT = timedelta(seconds=1)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this module's own, stopped and removed afterwards."""
    yield from serve_module()


def _sqlite_catalog(tmp_path: Path):
    from cdc_ingest.config import CatalogConfig

    return CatalogConfig("lake", f"sqlite:///{tmp_path}/catalog.db", tmp_path.as_uri())


def _postgres_catalog(postgres: PostgresServer):
    from cdc_ingest.config import CatalogConfig

    database = f"lock_{os.urandom(4).hex()}"
    uri = postgres.create_database(database, owner=f"{database}_owner", password="pw")
    return CatalogConfig("lake", uri, "file:///unused")


def _exclusion_holds(catalog) -> None:
    from cdc_ingest.state.locks import NamespaceLocked, namespace_lock

    def lock(exclusive: bool, purpose: str, namespace: str = "ods"):
        return namespace_lock(catalog, namespace, exclusive=exclusive, wait=SHORT, purpose=purpose)

    with lock(False, "ingest"), lock(False, "ingest"):
        # Two ingest runs share the namespace; maintenance cannot have it meanwhile.
        with pytest.raises(NamespaceLocked) as raised, lock(True, "maintenance"):
            pass
        assert str(raised.value) == (
            "namespace lake.ods is locked by ingest runs; maintenance gave up waiting after 1 s "
            "(ingest and maintenance of a namespace never overlap)"
        )
        # Another namespace is not affected.
        with lock(True, "maintenance", namespace="dw"):
            pass
    with lock(True, "maintenance"):
        with pytest.raises(NamespaceLocked) as raised, lock(False, "ingest"):
            pass
        assert "namespace lake.ods is locked by maintenance" in str(raised.value)
        assert "ingest gave up waiting after 1 s" in str(raised.value)
    # Released on leaving the block.
    with lock(True, "maintenance"):
        pass


def test_sqlite_catalog_lock_excludes_ingest_and_maintenance(tmp_path: Path) -> None:
    _exclusion_holds(_sqlite_catalog(tmp_path))


def test_sqlite_lock_names_the_maintenance_holder(tmp_path: Path) -> None:
    from cdc_ingest.state.locks import NamespaceLocked, namespace_lock

    catalog = _sqlite_catalog(tmp_path)
    with (
        namespace_lock(catalog, "ods", exclusive=True, wait=SHORT, purpose="maintenance"),
        pytest.raises(NamespaceLocked) as raised,
        namespace_lock(catalog, "ods", exclusive=False, wait=SHORT, purpose="ingest"),
    ):
        pass
    assert f"locked by maintenance (pid {os.getpid()} on " in str(raised.value)


@pytest.mark.slow
def test_postgresql_catalog_lock_excludes_ingest_and_maintenance(postgres) -> None:
    _exclusion_holds(_postgres_catalog(postgres))


def _one_run_at_a_time(catalog) -> None:
    import socket

    from cdc_ingest.state.locks import PipelineLocked, pipeline_lock

    with pipeline_lock(catalog, "ods", "orders", SHORT):
        with (
            pytest.raises(PipelineLocked) as raised,
            pipeline_lock(catalog, "ods", "orders", SHORT),
        ):
            pass
        message = str(raised.value)
        assert message.startswith(f"pipeline orders is being applied by pid {os.getpid()}")
        assert socket.gethostname()[:8] in message and " since 20" in message
        assert message.endswith(
            "; this run gave up waiting after 1 s (one batch of a pipeline at a time)"
        )
        # Other pipelines, and the same name in another namespace, run meanwhile.
        with (
            pipeline_lock(catalog, "ods", "items", SHORT),
            pipeline_lock(catalog, "dw", "orders", SHORT),
        ):
            pass
    with pipeline_lock(catalog, "ods", "orders", SHORT):
        pass


def test_sqlite_catalog_runs_one_batch_of_a_pipeline_at_a_time(tmp_path: Path) -> None:
    _one_run_at_a_time(_sqlite_catalog(tmp_path))


@pytest.mark.slow
def test_postgresql_catalog_runs_one_batch_of_a_pipeline_at_a_time(postgres) -> None:
    _one_run_at_a_time(_postgres_catalog(postgres))


def test_a_second_run_of_a_pipeline_exits_2_naming_the_run_it_waited_for(tmp_path: Path) -> None:
    import subprocess
    import sys

    import yaml
    from cdc_ingest.state.locks import pipeline_lock

    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "001.json").write_text("{}\n")
    config = tmp_path / "pipelines.yaml"
    catalog = _sqlite_catalog(tmp_path)
    doc = {
        "catalog": {"uri": catalog.uri, "warehouse": catalog.warehouse},
        "pipelines": [
            {
                "name": "orders",
                "format": "canal-json",
                "landing": landing.as_uri(),
                "namespace": "ods",
                "maintenance": {"lock_wait": "1s"},
            }
        ],
    }
    config.write_text(yaml.safe_dump(doc))
    cli = str(Path(sys.executable).parent / "cdc-ingest")
    with pipeline_lock(catalog, "ods", "orders", SHORT):
        done = subprocess.run(
            [cli, "run", "--config", str(config), "--pipeline", "orders"],
            capture_output=True,
            text=True,
        )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(
        f"cdc-ingest: error: pipeline orders is being applied by pid {os.getpid()} on "
    )
