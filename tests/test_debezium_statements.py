"""Statements from Debezium: DDL on the schema-change topic placed among the rows by the source's
binlog position, not by where the sink landed it (issue 51, defect 3), and TRUNCATE events
(defect 2). The events are shaped as MariaDB's connector sent them in the real-producer runs;
every expected row is the database's, written by hand."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from debezium_messages import (
    INT32,
    STRING,
    change,
    decimal,
    kafka_record,
    landed_name,
    schema_change,
)

SCHEMA_TOPIC = "mdb"


def _key(row_id: int) -> dict[str, Any]:
    return {
        "schema": {"type": "struct", "fields": [{**INT32, "field": "id"}]},
        "payload": {"id": row_id},
    }


def _land_topics(lake: Any, pipeline: str, topics: dict[str, list[tuple[Any, Any]]]) -> None:
    """Each topic's records in one file, as the sink names it (the schema topic's path sorts
    first, as on S3)."""
    landing = lake.landing(pipeline)
    for topic, records in topics.items():
        path = landing / landed_name(topic, 0)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [kafka_record(topic, n, k, v) for n, (k, v) in enumerate(records)]
        path.write_text("".join(f"{line}\n" for line in lines))


def test_statements_take_effect_at_their_binlog_position(lake):
    """A round as MariaDB wrote it: snapshot (CREATE TABLE, then its row), an update, ADD
    COLUMN, an update, DROP COLUMN, an update, RENAME TABLE, an insert under the new name. The
    schema topic lands ahead of the table topics; the mirror still equals the database."""
    lake.add_pipeline("mdb", "debezium-json", envelope="kafka")
    base = {"id": INT32, "name": STRING, "note": STRING}
    tagged = {**base, "tag": STRING}
    dropped = {"id": INT32, "name": STRING, "tag": STRING}
    create = (
        "CREATE TABLE `customers` (`id` int(11) NOT NULL, `name` varchar(20) DEFAULT NULL,"
        " `note` varchar(20) DEFAULT NULL, PRIMARY KEY (`id`))"
    )
    ddl_key = {"schema": {}, "payload": {"databaseName": "shop"}}
    _land_topics(
        lake,
        "mdb",
        {
            SCHEMA_TOPIC: [
                (ddl_key, schema_change(create, 1333, "customers", "true", 1795840964533)),
                (
                    ddl_key,
                    schema_change(
                        "ALTER TABLE customers ADD COLUMN tag varchar(10)", 1665, "customers"
                    ),
                ),
                (
                    ddl_key,
                    schema_change("ALTER TABLE customers DROP COLUMN note", 2100, "customers"),
                ),
                (ddl_key, schema_change("RENAME TABLE customers TO clients", 2319, "clients")),
            ],
            "mdb.shop.customers": [
                (
                    _key(1),
                    _snapshot(
                        change(
                            "customers",
                            base,
                            "r",
                            {"id": 1, "name": "a", "note": "n"},
                            position=1333,
                        )
                    ),
                ),
                (
                    _key(1),
                    change(
                        "customers", base, "u", {"id": 1, "name": "b", "note": "n"}, position=1490
                    ),
                ),
                (
                    _key(2),
                    change(
                        "customers",
                        tagged,
                        "c",
                        {"id": 2, "name": "x", "note": "m", "tag": "t"},
                        position=1965,
                    ),
                ),
                (
                    _key(1),
                    change(
                        "customers", dropped, "u", {"id": 1, "name": "c", "tag": "u"}, position=2200
                    ),
                ),
            ],
            "mdb.shop.clients": [
                (
                    _key(3),
                    change(
                        "clients", dropped, "c", {"id": 3, "name": "y", "tag": None}, position=2600
                    ),
                ),
            ],
        },
    )

    lake.run("mdb")

    assert lake.rows("clients") == [
        {"id": 1, "name": "c", "tag": "u"},
        {"id": 2, "name": "x", "tag": "t"},
        {"id": 3, "name": "y", "tag": None},
    ]
    assert lake.dead_letters() == []


def test_changes_before_a_drop_table_are_applied(lake):
    """An insert, then DROP TABLE, in the batch after the table's first: the mirror keeps the
    row the source held when it dropped the table."""
    lake.add_pipeline("mdb", "debezium-json", envelope="kafka")
    columns = {"id": INT32, "name": STRING}
    topic = "mdb.shop.tmp"
    first = lake.landing("mdb") / landed_name(topic, 0)
    first.parent.mkdir(parents=True)
    first.write_text(
        kafka_record(
            topic, 0, _key(4), change("tmp", columns, "c", {"id": 4, "name": "d"}, position=700)
        )
        + "\n"
    )
    lake.run("mdb")
    ddl_key = {"schema": {}, "payload": {"databaseName": "shop"}}
    dropped = lake.landing("mdb") / landed_name(SCHEMA_TOPIC, 0)
    dropped.parent.mkdir(parents=True)
    dropped.write_text(
        kafka_record(SCHEMA_TOPIC, 0, ddl_key, schema_change("DROP TABLE `tmp`", 900, "tmp")) + "\n"
    )
    second = lake.landing("mdb") / landed_name(topic, 1)
    second.write_text(
        kafka_record(
            topic, 1, _key(5), change("tmp", columns, "c", {"id": 5, "name": "e"}, position=800)
        )
        + "\n"
    )

    lake.run("mdb")

    assert lake.rows("tmp") == [{"id": 4, "name": "d"}, {"id": 5, "name": "e"}]


def test_truncate_applies_at_its_place(lake):
    """PostgreSQL's TRUNCATE event (op t, key null): rows before it are gone, rows after it
    stay, in one batch and across two."""
    columns = {"id": INT32, "name": STRING}
    lake.add_pipeline("pg", "debezium-json", envelope="kafka")
    topic = "pg.public.items"

    def insert(n: int, position: int) -> tuple[Any, Any]:
        return _key(n), change("items", columns, "c", {"id": n, "name": f"v{n}"}, position=position)

    truncate = change("items", columns, "t", None, position=300)
    _land_topics(
        lake, "pg", {topic: [insert(1, 100), insert(2, 200), (None, truncate), insert(3, 400)]}
    )
    lake.run("pg")
    assert lake.rows("items") == [{"id": 3, "name": "v3"}]

    later = lake.landing("pg") / landed_name(topic, 4)
    later.write_text(
        kafka_record(topic, 4, None, change("items", columns, "t", None, position=500))
        + "\n"
        + kafka_record(topic, 5, *insert(4, 600))
        + "\n"
    )
    lake.run("pg")
    assert lake.rows("items") == [{"id": 4, "name": "v4"}]


def _snapshot(value: dict[str, Any]) -> dict[str, Any]:
    """The event as a snapshot read it (snapshot 'last', the snapshot's start time)."""
    value["payload"]["source"].update(snapshot="last", ts_ms=1795840964000)
    return value


def test_an_added_column_with_a_default_holds_it_in_existing_rows(lake):
    """ADD COLUMN ... DEFAULT: rows the table held before the statement hold the default, as in
    MariaDB (defect 6); rows after it hold what their events say. A default that is an
    expression (CURRENT_TIMESTAMP) is not a value the statement gives: those rows stay null."""
    lake.add_pipeline("mdb", "debezium-json", envelope="kafka")
    plain = {"id": INT32, "name": STRING}
    tagged = {**plain, "tag": STRING, "fee": decimal(5, 2), "at": STRING}
    topic = "mdb.shop.customers"
    first = lake.landing("mdb") / landed_name(topic, 0)
    first.parent.mkdir(parents=True)
    first.write_text(
        "".join(
            kafka_record(
                topic,
                n - 1,
                _key(n),
                change("customers", plain, "c", {"id": n, "name": "a"}, position=100 + n),
            )
            + "\n"
            for n in (1, 2)
        )
    )
    lake.run("mdb")
    ddl_key = {"schema": {}, "payload": {"databaseName": "shop"}}
    statement = (
        "ALTER TABLE customers ADD COLUMN tag varchar(10) DEFAULT 'fresh',"
        " ADD COLUMN fee decimal(5,2) NOT NULL DEFAULT -1.25,"
        " ADD COLUMN at datetime DEFAULT CURRENT_TIMESTAMP"
    )
    schema_file = lake.landing("mdb") / landed_name(SCHEMA_TOPIC, 0)
    schema_file.parent.mkdir(parents=True)
    schema_file.write_text(
        kafka_record(SCHEMA_TOPIC, 0, ddl_key, schema_change(statement, 300, "customers")) + "\n"
    )
    second = lake.landing("mdb") / landed_name(topic, 2)
    second.write_text(
        kafka_record(
            topic, 2, _key(1), change("customers", plain, "u", {"id": 1, "name": "b"}, position=200)
        )
        + "\n"
        + kafka_record(
            topic,
            3,
            _key(3),
            change(
                "customers",
                tagged,
                "c",
                {"id": 3, "name": "c", "tag": "x", "fee": "AA==", "at": None},
                position=400,
            ),
        )
        + "\n"
    )

    lake.run("mdb")

    assert lake.rows("customers") == [
        {"id": 1, "name": "b", "tag": "fresh", "fee": Decimal("-1.25"), "at": None},
        {"id": 2, "name": "a", "tag": "fresh", "fee": Decimal("-1.25"), "at": None},
        {"id": 3, "name": "c", "tag": "x", "fee": Decimal("0.00"), "at": None},
    ]
