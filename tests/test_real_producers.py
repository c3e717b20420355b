"""Real producers: PostgreSQL and MariaDB on loopback, Debezium's connectors (from Maven, run by
its embedded engine) landing every change as a Kafka Connect S3 sink would, in both shapes users
have (the Kafka record envelope, and value-only lines with keys from the config). After every
round of a seeded random workload (every common type, inserts, updates, key changes, deletes,
TOAST, TRUNCATE, and for MariaDB DDL on its schema-change topic) one batch runs, and every table
is compared with the database row by row (issue 51)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import debezium_lander
import mariadb_server
import postgres_server
import pytest
from real_compare import db_rows, differences, mirror_rows
from real_workloads import Workload, schema_round

pytestmark = pytest.mark.slow

PASSWORD = "lander-secret"
SHAPES = {"kafka": "kafka", "value": "none"}


@pytest.fixture(scope="module")
def postgres() -> Iterator[postgres_server.PostgresServer]:
    reason = postgres_server.unavailable_reason() or debezium_lander.unavailable_reason("postgres")
    if reason:
        pytest.skip(reason)
    settings = (("wal_level", "logical"), ("max_replication_slots", "8"), ("max_wal_senders", "8"))
    server = postgres_server.start_server(settings)
    server.sql(f"CREATE ROLE lander LOGIN REPLICATION SUPERUSER PASSWORD '{PASSWORD}'")
    try:
        yield server
    finally:
        postgres_server.remove_server(server)


@pytest.fixture(scope="module")
def mariadb() -> Iterator[mariadb_server.MariaDbServer]:
    reason = debezium_lander.unavailable_reason("mariadb")
    if reason:
        pytest.skip(reason)
    for server in mariadb_server.serve_module():
        server.sql(
            f"CREATE USER lander@'%' IDENTIFIED BY '{PASSWORD}'; GRANT ALL ON *.* TO lander@'%';"
        )
        yield server


class Database:
    """One database of a server: runs statements, reads a table's rows as JSON documents."""

    def __init__(self, server: Any, dialect: str, name: str) -> None:
        self.server, self.dialect, self.name = server, dialect, name

    def run(self, statements: list[str]) -> None:
        if self.dialect == "postgres":
            for statement in statements:
                self.server.sql(statement, self.name)
        else:
            self.server.sql("".join(f"{s};\n" for s in statements), self.name)

    def documents(self, table: str) -> list[str]:
        if self.dialect == "postgres":
            out = self.server.sql(f"SELECT row_to_json(t) FROM {table} t", self.name)
            return out.splitlines()
        described = self.server.sql(
            "SELECT column_name, data_type FROM information_schema.columns WHERE"
            f" table_schema = '{self.name}' AND table_name = '{table}' ORDER BY ordinal_position"
        )
        pairs = [line.split("\t") for line in described.splitlines()]
        binary = ("binary", "varbinary", "blob", "tinyblob", "mediumblob", "longblob")
        fields = ", ".join(
            f"'{c}', {'HEX(`' + c + '`)' if t in binary else '`' + c + '`'}" for c, t in pairs
        )
        out = self.server.sql(
            f"SET time_zone = '+00:00'; SELECT JSON_OBJECT({fields}) FROM `{table}`", self.name
        )
        return out.splitlines()


def _connector(dialect: str, server: Any, database: str, shape: str) -> dict[str, str]:
    common = {
        "database.hostname": server.host,
        "database.port": str(server.port),
        "database.user": "lander",
        "database.password": PASSWORD,
        "topic.prefix": f"{dialect[:2]}{shape}",
        "skipped.operations": "none",
        # Kafka Connect's JSON converter writes a column's DEFAULT for a NULL value unless told
        # not to (replace.null.with.default, true since Kafka 3.5): the mirror would hold it.
        "converter.replace.null.with.default": "false",
    }
    if dialect == "postgres":
        return {
            **common,
            "database.dbname": database,
            "plugin.name": "pgoutput",
            "slot.name": f"lander_{shape}",
            "publication.name": f"lander_{shape}",
            "publication.autocreate.mode": "all_tables",
        }
    return {
        **common,
        "database.server.id": str(5400 + len(shape)),
        "database.include.list": database,
        "include.schema.changes": "true",
        "bigint.unsigned.handling.mode": "precise",
        "database.ssl.mode": "disable",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        # Else the schema-change topic carries every database's statements, and a {table}
        # template would apply another database's ALTER to the same-named mirror.
        "schema.history.internal.store.only.captured.databases.ddl": "true",
    }


def _rounds(workload: Workload) -> list[Callable[[], list[str]]]:
    """Each round's statements, made when the round comes (the model follows the schema)."""
    w = workload
    if w.dialect == "postgres":
        return [w.changes, lambda: schema_round(w, 0), w.changes, lambda: schema_round(w, 3)]
    return [w.changes, *(lambda step=step: schema_round(w, step) for step in range(4))]


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("dialect", ["postgres", "mariadb"])
def test_the_mirror_equals_the_database_after_every_batch(
    request: pytest.FixtureRequest, lake: Any, tmp_path: Path, dialect: str, shape: str
) -> None:
    server = request.getfixturevalue(dialect)
    name = f"shop_{shape}"
    if dialect == "postgres":
        server.sql(f"CREATE DATABASE {name} OWNER lander")
    else:
        server.sql(f"CREATE DATABASE {name}")
    database = Database(server, dialect, name)
    workload = Workload(dialect, seed=51 + len(shape))
    database.run(workload.create())
    landing = tmp_path / "landing"
    landing.mkdir()
    properties = _connector(dialect, server, name, shape)
    if dialect == "mariadb":
        properties["schema.history.internal.file.filename"] = str(tmp_path / "history.dat")
    keys = {t.name: list(t.keys) for t in workload.tables.values()}
    keys |= {"ledger": ["code", "n"], "notes": ["id"], "scratch": ["id"]}
    lake.add_pipeline(
        "real",
        "debezium-json",
        landing=landing.as_uri(),
        envelope=SHAPES[shape],
        **({"keys": keys} if shape == "value" else {}),
    )
    marker_topic = (
        f"{properties['topic.prefix']}.{'public' if dialect == 'postgres' else name}.marker"
    )
    lander = debezium_lander.RunningLander(dialect, properties, landing, shape, tmp_path / "lander")
    try:
        for number, statements in enumerate(_rounds(workload), start=1):
            database.run([*statements(), workload.marker()])
            lander.wait_for(marker_topic, number)
            summary = lake.run("real")
            for table in workload.tables.values():
                columns, mirrored = mirror_rows(
                    lake.spark, f"{lake.catalog}.ods.{table.name}", table
                )
                held = db_rows(database.documents(table.name), table)
                shown = json.dumps([summary.render()])[:3000]
                assert sorted(columns) == sorted(next(iter(held.values()), {}) or columns), (
                    f"round {number}, {table.name}: columns {columns}\n{shown}"
                )
                diff = differences(held, mirrored)
                assert not diff, f"round {number}, {table.name}:\n" + "\n".join(diff) + f"\n{shown}"
            assert lake.dead_letters() == []
    finally:
        lander.stop()
