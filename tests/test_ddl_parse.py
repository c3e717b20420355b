"""DDL statements as the sources send them, parsed into schema changes (no Spark needed)."""

from __future__ import annotations

import json

import pytest
from cdc_ingest.schema.ddl_parse import (
    ADD_COLUMN,
    CREATE_TABLE,
    DROP_COLUMN,
    DROP_TABLE,
    MODIFY_COLUMN,
    NO_CHANGE,
    RENAME_COLUMN,
    RENAME_TABLE,
    TRUNCATE_TABLE,
    parse_ddl,
)
from conftest import CONFORMANCE, FIXTURES

PAIMON_CANAL = CONFORMANCE / "paimon" / "kafka" / "canal"


def changes(statement: str) -> list[tuple]:
    parsed = parse_ddl(statement)
    assert parsed.error is None, parsed.error
    return [
        (c.action, c.column, c.new_name, c.column_type.spark_type if c.column_type else None)
        for c in parsed.changes
    ]


def test_seed_002_alter_adds_a_text_column() -> None:
    alter = json.loads((FIXTURES / "datahub-blob" / "alter.jsonl").read_text())
    statement = alter["payload"]["ddl"]["text"]
    assert parse_ddl(statement).table == "t_test_nopk"
    assert changes(statement) == [(ADD_COLUMN, "holo", None, "string")]


def test_paimon_multi_clause_alter_with_comment_and_odd_column_name() -> None:
    path = PAIMON_CANAL / "table" / "schemaevolutionmultiple" / "canal-data-2.txt"
    statements = [
        json.loads(line)["sql"]
        for line in path.read_text().splitlines()
        if line.startswith("{") and json.loads(line).get("isDdl")
    ]
    [statement] = statements
    assert statement.startswith("/* Query from DMS-WEBSQL")
    assert parse_ddl(statement).table == "schema_evolution_multiple"
    assert changes(statement) == [
        (ADD_COLUMN, "v4", None, "bigint"),
        (MODIFY_COLUMN, "v1", None, "string"),
        (ADD_COLUMN, "v5", None, "double"),
        (ADD_COLUMN, "v6", None, "decimal(5,3)"),
        (ADD_COLUMN, "$% ^,& *(", None, "string"),
        (MODIFY_COLUMN, "v2", None, "bigint"),
    ]


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("ALTER TABLE db.t DROP COLUMN c, DROP d", [(DROP_COLUMN, "c"), (DROP_COLUMN, "d")]),
        ("ALTER TABLE t CHANGE COLUMN a b BIGINT", [(RENAME_COLUMN, "a", "b", "bigint")]),
        ("ALTER TABLE t RENAME COLUMN a TO b", [(RENAME_COLUMN, "a", "b")]),
        ("ALTER TABLE t MODIFY v BIGINT UNSIGNED", [(MODIFY_COLUMN, "v", None, "decimal(20,0)")]),
        ("ALTER TABLE t RENAME TO t2", [(RENAME_TABLE, None, "t2")]),
        ("RENAME TABLE db.t TO db.t2", [(RENAME_TABLE, None, "t2")]),
        ("TRUNCATE TABLE t", [(TRUNCATE_TABLE,)]),
        ("DROP TABLE IF EXISTS db.t", [(DROP_TABLE,)]),
        (
            "ALTER TABLE T ADD (C3 NUMBER(10,2), C4 VARCHAR2(5))",  # Oracle's column list
            [(ADD_COLUMN, "C3", None, "decimal(10,2)"), (ADD_COLUMN, "C4", None, "string")],
        ),
        (
            "ALTER TABLE `t` ADD COLUMN `a b` INT NOT NULL DEFAULT 0 COMMENT 'c' AFTER x",
            [(ADD_COLUMN, "a b", None, "bigint")],
        ),
    ],
)
def test_column_and_table_changes(statement: str, expected: list[tuple]) -> None:
    padded = [tuple(e) + (None,) * (4 - len(e)) for e in expected]
    assert changes(statement) == padded
    assert parse_ddl(statement).table == "t" or statement.upper().startswith("ALTER TABLE T ADD")


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE t ADD INDEX idx (a)",
        "ALTER TABLE t ALTER COLUMN a SET DEFAULT 1",
        "ALTER TABLE t COMMENT 'x'",
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
        "CREATE INDEX i ON t (a)",
    ],
)
def test_statements_that_change_nothing_in_iceberg(statement: str) -> None:
    assert [c[0] for c in changes(statement)] == [NO_CHANGE]


def test_create_table_names_columns_and_key() -> None:
    parsed = parse_ddl(
        "CREATE TABLE `orders` (id INT, note VARCHAR(10), PRIMARY KEY (id)) ENGINE=InnoDB"
    )
    [create] = parsed.changes
    assert (parsed.table, create.action, create.keys) == ("orders", CREATE_TABLE, ("id",))
    assert {n: t.spark_type for n, t in create.columns.items()} == {
        "id": "bigint",
        "note": "string",
    }


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("garbage statement here", "cannot parse the statement (mysql: "),
        ("ALTER TABLE t FROBNICATE", "cannot understand the clause 'FROBNICATE'"),
        ("RENAME TABLE a TO b, c TO d", "cannot parse the statement"),
    ],
)
def test_statements_it_cannot_understand_say_why(statement: str, reason: str) -> None:
    parsed = parse_ddl(statement)
    assert parsed.changes == () and parsed.error is not None and reason in parsed.error
