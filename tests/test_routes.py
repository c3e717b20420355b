"""Routes (``routes:``): sharded source tables into one mirror, the shard's names kept in columns
that may join the key, DDL on any shard applied once (docs/pipelines.md, "Routes")."""

from __future__ import annotations

from itertools import count

import pytest
from cdc_ingest.config import ConfigError, load_config

_es = count(1_700_000_000_000)
MYSQL = {"id": "int(11)", "item": "varchar(32)", "note": "varchar(20)"}
ORDERS = r"db_[0-9]+\.orders_[0-9]+"


def oms_canal(db: str, table: str, kind: str, row: dict) -> dict:
    """An OMS Canal row message (values typed as JSON, the MySQL types beside them)."""
    es = next(_es)
    return {
        "data": [row],
        "database": db,
        "es": es,
        "id": es,
        "isDdl": False,
        "mysqlType": {c: MYSQL[c] for c in row},
        "old": None,
        "pkNames": ["id"],
        "sql": "",
        "table": table,
        "ts": es + 5,
        "type": kind,
    }


def oms_ddl(db: str, table: str, sql: str) -> dict:
    es = next(_es)
    return {
        "data": None,
        "database": db,
        "es": es,
        "id": es,
        "isDdl": True,
        "mysqlType": None,
        "old": None,
        "pkNames": None,
        "sql": sql,
        "table": table,
        "ts": es + 5,
        "type": "ALTER",
    }


SHARDS = [(f"db_{d:02d}", f"orders_{d * 16 + t:04d}") for d in range(8) for t in range(2)]


def test_eight_sharded_databases_of_an_oms_canal_stream_are_one_table(lake):
    lake.add_pipeline("oms", "oms-canal", routes=[{"source": ORDERS, "table": "orders"}])
    first = [
        oms_canal(db, table, "INSERT", {"id": n, "item": f"item {n}"})
        for n, (db, table) in enumerate(SHARDS)
    ]
    first.append(oms_canal("db_00", "users", "INSERT", {"id": 1, "item": "not routed"}))
    lake.land("oms", "001.json", first)
    summary = lake.run("oms")
    assert summary.tables["orders"].inserted == 16 and summary.tables["users"].inserted == 1
    shown = lake.spark.sql(f"SHOW TABLES IN {lake.catalog}.ods").collect()
    assert {r["tableName"] for r in shown if not r["tableName"].startswith("_cdc_")} == {
        "orders",
        "users",
    }
    stored = sorted(
        lake.rows("orders", "id", "_cdc_source_db", "_cdc_source_table"), key=lambda r: r["id"]
    )
    assert stored[:2] == [
        {"id": 0, "_cdc_source_db": "db_00", "_cdc_source_table": "orders_0000"},
        {"id": 1, "_cdc_source_db": "db_00", "_cdc_source_table": "orders_0001"},
    ]
    assert stored[-1] == {"id": 15, "_cdc_source_db": "db_07", "_cdc_source_table": "orders_0113"}
    types = {f.name: f.dataType.simpleString() for f in lake.table("orders").schema.fields}
    assert (types["_cdc_source_db"], types["_cdc_source_table"]) == ("string", "string")
    assert "_cdc_source_db" not in lake.table("users").columns

    # Every shard adds the column: one column, the first statement applies it.
    second = [oms_ddl(db, t, f"ALTER TABLE {t} ADD COLUMN note VARCHAR(20)") for db, t in SHARDS]
    second.append(oms_canal("db_03", "orders_0048", "UPDATE", {"id": 6, "item": "x", "note": "n"}))
    second.append(oms_ddl("db_05", "orders_0080", "TRUNCATE TABLE orders_0080"))
    lake.land("oms", "002.json", second)
    summary = lake.run("oms")
    assert summary.ddl_applied == 2 and summary.ddl_rejected == 0
    history = lake.table("_cdc_ddl_history").orderBy("file", "line").collect()
    assert [r["status"] for r in history] == ["applied"] + ["no_change"] * 15 + ["applied"]
    assert history[-1]["detail"] == "removed the rows of db_05.orders_0080"
    rows = lake.rows("orders", "id", "item", "note")
    assert {"id": 6, "item": "x", "note": "n"} in rows
    # db_05.orders_0080 held id 10.
    assert sorted(r["id"] for r in rows) == [n for n in range(16) if n != 10]


def test_shards_that_reuse_keys_keep_their_rows_apart_with_key_with_source(lake):
    route = {"source": ORDERS, "table": "orders", "key_with_source": True}
    lake.add_pipeline("oms", "oms-canal", routes=[route])
    lines = [
        oms_canal("db_00", "orders_0000", "INSERT", {"id": 1, "item": "a"}),
        oms_canal("db_01", "orders_0016", "INSERT", {"id": 1, "item": "b"}),
    ]
    lake.land("oms", "001.json", lines)
    lake.run("oms")
    lake.land("oms", "002.json", [oms_canal("db_01", "orders_0016", "DELETE", {"id": 1})])
    summary = lake.run("oms")
    assert summary.tables["orders"].deleted == 1
    assert lake.rows("orders", "_cdc_source_db", "id", "item") == [
        {"_cdc_source_db": "db_00", "id": 1, "item": "a"}
    ]
    properties = {
        r["key"]: r["value"]
        for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.catalog}.ods.orders").collect()
    }
    assert properties["cdc.keys"] == "_cdc_source_db,_cdc_source_table,id"


def test_without_key_with_source_a_reused_key_is_one_row_and_columns_can_be_named(lake):
    route = {"source": ORDERS, "table": "orders", "db_column": "shard_db", "table_column": "shard"}
    lake.add_pipeline("oms", "oms-canal", routes=[route])
    lines = [
        oms_canal("db_00", "orders_0000", "INSERT", {"id": 1, "item": "a"}),
        oms_canal("db_01", "orders_0016", "UPDATE", {"id": 1, "item": "b"}),
    ]
    lake.land("oms", "001.json", lines)
    lake.run("oms")
    assert lake.rows("orders", "id", "item", "shard_db", "shard") == [
        {"id": 1, "item": "b", "shard_db": "db_01", "shard": "orders_0016"}
    ]


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ({"source": ORDERS, "table": "orders"}, "routes: must be a list"),
        ([{"source": "db_[", "table": "orders"}], "is not a regular expression"),
        ([{"source": ORDERS, "table": "_cdc_x"}], "names beginning with _cdc_ are the job's own"),
        ([{"source": ORDERS, "table": "orders", "sink": "x"}], "unknown key 'sink'"),
        ([{"source": ORDERS, "table": "orders", "key_with_source": "yes"}], "true or false"),
    ],
)
def test_routes_are_checked_when_the_file_is_loaded(lake, routes, message):
    lake.add_pipeline("oms", "oms-canal", routes=routes)
    with pytest.raises(ConfigError, match=message):
        load_config(lake.config_path)


def test_shards_whose_rows_differ_merge_into_one_schema(lake):
    """A shard whose rows carry a column the table lacks adds it to the one table (the usual
    evolution of a column the messages carry); the other shards' rows hold null there."""
    lake.add_pipeline("oms", "oms-canal", routes=[{"source": ORDERS, "table": "orders"}])
    lake.land(
        "oms", "001.json", [oms_canal("db_00", "orders_0000", "INSERT", {"id": 1, "item": "a"})]
    )
    lake.run("oms")
    lines = [
        oms_canal("db_01", "orders_0016", "INSERT", {"id": 2, "item": "b", "note": "n"}),
        oms_canal("db_00", "orders_0000", "INSERT", {"id": 3, "item": "c"}),
    ]
    lake.land("oms", "002.json", lines)
    summary = lake.run("oms")
    assert summary.tables["orders"].inserted == 2 and summary.dead_lettered == 0
    assert lake.rows("orders", "id", "item", "note") == [
        {"id": 1, "item": "a", "note": None},
        {"id": 2, "item": "b", "note": "n"},
        {"id": 3, "item": "c", "note": None},
    ]
