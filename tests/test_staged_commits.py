"""A group's small-table rewrites committed together (``snapshots/staged_commits.py``), on a SQLite
catalog file and on a real PostgreSQL server: every table in one catalog transaction or, when
another writer committed to one of them since the batch read it, each of the others alone and
that one left for Spark's guarded MERGE."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from postgres_server import PostgresServer, serve_module

NAMESPACE = "shop"
TABLES = ("items", "orders")
COLUMNS = {"id": "bigint", "v": "string"}


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    yield from serve_module()


@pytest.fixture(params=["sqlite", "postgresql"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A catalog of two small tables, each holding rows 1, 2 and 3 in one data file."""
    from cdc_ingest.catalog.config import CatalogConfig
    from cdc_ingest.snapshots.arrow_catalog import ArrowCatalog
    from pyiceberg.catalog.sql import SqlCatalog

    if request.param == "sqlite":
        uri = f"sqlite:///{tmp_path}/catalog.db"
        SqlCatalog("staged", uri=uri, warehouse=(tmp_path / "wh").as_uri())
    else:
        server: PostgresServer = request.getfixturevalue("postgres")
        database = f"staged_{os.urandom(4).hex()}"
        uri = server.create_database(database, owner=f"{database}_owner", password="pw")
    config = CatalogConfig("staged", uri, (tmp_path / "wh").as_uri())
    setup = ArrowCatalog(config)
    catalog = setup.opened()
    assert catalog is not None
    catalog.create_namespace(NAMESPACE)
    for name in TABLES:
        setup.create_keyed(_identifier(name), COLUMNS, ("id",), {"format-version": "2"})
        setup.append(_identifier(name), _rows((1, "a"), (2, "b"), (3, "c")), {})
    setup.close()
    return config


def _identifier(name: str) -> str:
    return f"`staged`.`{NAMESPACE}`.`{name}`"


def _rows(*rows: tuple[int, str]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "v": [r[1] for r in rows]})


def _rewrite_both(config: Any, meanwhile: Any = None) -> tuple[set[str], list[str]]:
    """Read both tables as a batch does, then rewrite them in one block (key 1 updated, key 2
    deleted, key 4 inserted; ``meanwhile()`` called after the first rewrite is staged); returns
    the identifiers left out and the catalog database's transaction endings."""
    from cdc_ingest.snapshots.arrow_catalog import ArrowCatalog
    from pyiceberg.catalog.sql import SqlCatalog
    from sqlalchemy import event

    arrow = ArrowCatalog(config)
    endings: list[str] = []
    catalog = arrow.opened()
    assert isinstance(catalog, SqlCatalog)
    engine = catalog.engine
    event.listen(engine, "commit", lambda _: endings.append("commit"))
    event.listen(engine, "rollback", lambda _: endings.append("rollback"))
    read_at = {}
    for name in TABLES:
        assert arrow.table_facts(_identifier(name)) is not None
        read = arrow.read_columns(_identifier(name), ["id"], 1000)
        assert read is not None
        read_at[name] = read[0]
    endings.clear()
    with arrow.rewritten_together() as moved:
        for name in TABLES:
            staged = arrow.replace_rows(
                _identifier(name),
                read_at[name],
                ("id",),
                _rows((1, ""), (2, "")),
                _rows((1, f"{name}-a2"), (4, f"{name}-d")),
                {"cdc.batch-id": "2"},
                1000,
            )
            assert staged
            if meanwhile is not None and name == TABLES[0]:
                meanwhile()
        assert endings == []  # nothing committed before the block ends
    arrow.close()
    return moved, endings


def _table(config: Any, name: str) -> Any:
    from cdc_ingest.state.lake import open_catalog

    return open_catalog(config).load_table((NAMESPACE, name))


def _values(config: Any, name: str) -> list[tuple[int, str]]:
    rows = _table(config, name).scan().to_arrow().sort_by("id")
    return list(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist(), strict=True))


def test_rewrites_are_committed_in_one_transaction(config: Any) -> None:
    moved, endings = _rewrite_both(config)

    assert moved == set()
    assert endings == ["commit"]
    for name in TABLES:
        assert _values(config, name) == [(1, f"{name}-a2"), (3, "c"), (4, f"{name}-d")]
        snapshot = _table(config, name).current_snapshot()
        assert (snapshot.summary.operation.value, snapshot.summary["cdc.batch-id"]) == (
            "overwrite",
            "2",
        )


def test_a_table_another_writer_moved_is_left_out_and_the_other_committed_alone(
    config: Any,
) -> None:
    from cdc_ingest.state.lake import open_catalog

    def another_writer_appends_to_items() -> None:
        table = open_catalog(config).load_table((NAMESPACE, "items"))
        table.append(_rows((9, "other")).cast(table.schema().as_arrow()))

    moved, endings = _rewrite_both(config, another_writer_appends_to_items)

    assert moved == {_identifier("items")}
    # The joint transaction finds items moved and commits nothing; each table alone then: items
    # refused again, orders committed.
    assert endings == ["rollback", "rollback", "commit"]
    assert _values(config, "items") == [(1, "a"), (2, "b"), (3, "c"), (9, "other")]
    assert _values(config, "orders") == [(1, "orders-a2"), (3, "c"), (4, "orders-d")]
