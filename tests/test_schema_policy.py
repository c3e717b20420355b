"""Schema policy per kind of change: what each kind of DDL or inferred change does to a mirror,
per pipeline and per table (``schema_changes`` as a mapping, docs/schema-changes.md)."""

from __future__ import annotations

from itertools import count

import pytest
from canal_messages import canal_message, ddl_message
from cdc_ingest.config import ConfigError, load_config
from cdc_ingest.schema.evolution import SchemaChangeRefused

TYPES = {"id": "INT", "v1": "VARCHAR(10)", "v2": "INT", "v3": "INT", "price": "DECIMAL(5,2)"}
_es = count(1_700_000_000_000)


def row(kind: str, data: dict, table: str = "orders") -> dict:
    typed = {c: TYPES.get(c, "VARCHAR(10)") for c in data}
    return canal_message(table, kind, data, next(_es), typed)


def ddl(sql: str, table: str = "orders") -> dict:
    return ddl_message(table, sql, "ALTER", next(_es))


def history(lake) -> list[tuple]:
    rows = lake.table("_cdc_ddl_history").orderBy("file", "line").collect()
    return [(r["target_table"], r["status"], r["detail"]) for r in rows]


def columns(lake, table: str = "orders") -> list[str]:
    return [c for c in lake.table(table).columns if not c.startswith("_cdc_")]


def test_add_column_applies_while_drop_column_is_ignored_and_the_column_kept(lake):
    lake.add_pipeline("shop", "canal-json", schema_changes={"drop_column": "ignore"})
    lake.land("shop", "001.json", [row("INSERT", {"id": 1, "v1": "a"})])
    lake.run("shop")
    lines = [
        ddl("ALTER TABLE orders ADD COLUMN v2 INT"),
        row("INSERT", {"id": 2, "v1": "b", "v2": 20}),
        ddl("ALTER TABLE orders DROP COLUMN v1"),
        row("INSERT", {"id": 3, "v2": 30}),
        ddl("ALTER TABLE orders ADD COLUMN v3 INT, DROP COLUMN v2"),
        row("INSERT", {"id": 4, "v3": 40}),
    ]
    lake.land("shop", "002.json", lines)
    summary = lake.run("shop")
    assert columns(lake) == ["id", "v1", "v2", "v3"]  # the dropped columns kept, nullable
    assert lake.rows("orders") == [
        {"id": 1, "v1": "a", "v2": None, "v3": None},
        {"id": 2, "v1": "b", "v2": 20, "v3": None},
        {"id": 3, "v1": None, "v2": 30, "v3": None},
        {"id": 4, "v1": None, "v2": None, "v3": 40},
    ]
    assert summary.dead_lettered == 0
    assert history(lake) == [
        ("orders", "applied", "added v2 bigint"),
        ("orders", "ignored", "schema_changes drop_column: ignore"),
        (
            "orders",
            "applied",
            "added v3 bigint; left out: DROP COLUMN v2 (schema_changes drop_column: ignore)",
        ),
    ]


def test_a_tables_own_policy_wins_over_the_pipelines(lake):
    # The pipeline fails on every change but the audit table, which takes new columns.
    lake.add_pipeline(
        "shop",
        "canal-json",
        schema_changes="fail",
        table_options={"audit": {"schema_changes": {"add_column": "apply"}}},
    )
    first = [row("INSERT", {"id": 1, "v1": "a"}), row("INSERT", {"id": 1, "v1": "a"}, "audit")]
    lake.land("shop", "001.json", first)
    lake.run("shop")
    lake.land("shop", "002.json", [row("INSERT", {"id": 2, "v1": "b", "v2": 20}, "audit")])
    summary = lake.run("shop")
    assert summary.tables["audit"].inserted == 1
    assert columns(lake, "audit") == ["id", "v1", "v2"]
    lake.land("shop", "003.json", [row("INSERT", {"id": 2, "v1": "b", "v2": 20})])
    with pytest.raises(SchemaChangeRefused, match="orders: add_column: messages carry"):
        lake.run("shop")
    assert columns(lake) == ["id", "v1"]


def test_dead_letter_holds_the_tables_changes_with_the_reason_and_others_flow(lake):
    lake.add_pipeline(
        "shop",
        "canal-json",
        table_options={"orders": {"schema_changes": {"drop_column": "dead-letter"}}},
    )
    lake.land("shop", "001.json", [row("INSERT", {"id": 1, "v1": "a"})])
    lake.run("shop")
    lines = [
        row("INSERT", {"id": 2, "v1": "b"}),
        ddl("ALTER TABLE orders DROP COLUMN v1"),
        row("INSERT", {"id": 3}),
        row("INSERT", {"id": 7, "v1": "x"}, "items"),
        ddl("ALTER TABLE items DROP COLUMN v1", "items"),  # items keeps the default: apply
    ]
    lake.land("shop", "002.json", lines)
    summary = lake.run("shop")
    assert summary.tables["orders"].dead_lettered == 2 and summary.dead_lettered == 2
    assert lake.rows("orders") == [{"id": 1, "v1": "a"}]  # nothing of the batch
    assert columns(lake, "items") == ["id"]
    reasons = {r["reason"] for r in lake.dead_letters()}
    assert reasons == {
        "table orders waits: schema_changes is dead-letter for drop_column "
        "'ALTER TABLE orders DROP COLUMN v1'"
    }
    assert history(lake)[0] == (
        "orders",
        "failed",
        "waits: schema_changes is dead-letter for drop_column 'ALTER TABLE orders DROP COLUMN "
        "v1'; the table's changes of the batch are dead letters",
    )
    # A later batch without such a change applies as before.
    lake.land("shop", "003.json", [row("UPDATE", {"id": 1, "v1": "aa"})])
    assert lake.run("shop").tables["orders"].updated == 1
    assert lake.rows("orders") == [{"id": 1, "v1": "aa"}]


def test_fail_for_one_kind_stops_the_batch_and_other_kinds_apply(lake):
    lake.add_pipeline("shop", "canal-json", schema_changes={"truncate": "fail"})
    lake.land("shop", "001.json", [row("INSERT", {"id": 1, "v1": "a"})])
    lake.run("shop")
    lake.land("shop", "002.json", [ddl("ALTER TABLE orders ADD COLUMN v2 INT")])
    assert lake.run("shop").ddl_applied == 1
    lake.land("shop", "003.json", [row("INSERT", {"id": 2}), ddl("TRUNCATE TABLE orders")])
    with pytest.raises(SchemaChangeRefused, match="orders: truncate 'TRUNCATE TABLE orders'"):
        lake.run("shop")
    assert lake.rows("orders", "id") == [{"id": 1}]  # not even the insert before it


def test_create_table_ignore_creates_no_table_and_counts_its_changes_skipped(lake):
    lake.add_pipeline(
        "shop",
        "canal-json",
        table_options={"*": {"schema_changes": {"create_table": "ignore"}}},
    )
    lines = [row("INSERT", {"id": 1, "v1": "a"}), row("INSERT", {"id": 2, "v1": "b"}, "items")]
    lake.land("shop", "001.json", lines)
    summary = lake.run("shop")
    assert summary.skipped_tables == {
        "orders": "not created (schema_changes create_table: ignore)",
        "items": "not created (schema_changes create_table: ignore)",
    }
    assert summary.skipped_table_messages == 2 and summary.dead_lettered == 0
    shown = lake.spark.sql(f"SHOW TABLES IN {lake.catalog}.ods").collect()
    assert not {r["tableName"] for r in shown} & {"orders", "items"}


def test_type_changes_follow_their_kind_and_truncate_can_be_ignored(lake):
    lake.add_pipeline(
        "shop",
        "canal-json",
        schema_changes={"narrow_type": "ignore", "widen_type": "ignore", "truncate": "ignore"},
    )
    lake.land("shop", "001.json", [row("INSERT", {"id": 1, "v1": "a", "price": "1.50"})])
    lake.run("shop")
    lines = [
        ddl("ALTER TABLE orders ADD COLUMN v2 INT, MODIFY v1 INT"),  # string -> bigint narrows
        ddl("ALTER TABLE orders MODIFY price DECIMAL(7,2)"),
        ddl("TRUNCATE TABLE orders"),
        row("INSERT", {"id": 2, "v1": "b", "price": "2.50", "v2": 20}),
    ]
    lake.land("shop", "002.json", lines)
    lake.run("shop")
    types = {f.name: f.dataType.simpleString() for f in lake.table("orders").schema.fields}
    assert (types["v1"], types["price"], types["v2"]) == ("string", "decimal(5,2)", "bigint")
    assert lake.rows("orders", "id", "v2") == [{"id": 1, "v2": None}, {"id": 2, "v2": 20}]
    assert [(s, d) for _, s, d in history(lake)] == [
        ("applied", "added v2 bigint; left out: MODIFY v1 (schema_changes narrow_type: ignore)"),
        ("ignored", "schema_changes widen_type: ignore"),
        ("ignored", "schema_changes truncate: ignore"),
    ]


def test_the_policy_keys_are_checked_when_the_file_is_loaded(lake):
    lake.add_pipeline("shop", "canal-json", schema_changes={"narrow_type": "apply"})
    with pytest.raises(ConfigError, match="Iceberg cannot narrow a column's type"):
        load_config(lake.config_path)
    lake.add_pipeline("shop", "canal-json", schema_changes={"add_columns": "apply"})
    with pytest.raises(ConfigError, match="unknown kind of change 'add_columns'"):
        load_config(lake.config_path)
    lake.add_pipeline("shop", "canal-json", schema_changes={"add_column": "evolve"})
    with pytest.raises(ConfigError, match="must be one of apply, ignore, dead-letter, fail"):
        load_config(lake.config_path)
    lake.add_pipeline(
        "shop",
        "canal-json",
        schema_changes={"add_column": "apply", "drop_column": "ignore"},
        table_options={"orders": {"schema_changes": {"drop_column": "fail"}}},
    )
    tables = load_config(lake.config_path).pipeline("shop").tables
    orders = tables.for_table("orders").schema_policy
    items = tables.for_table("items").schema_policy
    assert (orders["drop_column"], orders["add_column"], orders["rename_column"]) == (
        "fail",
        "apply",
        "apply",
    )
    assert (items["drop_column"], items["narrow_type"]) == ("ignore", "reject")


def test_only_a_policy_that_holds_something_back_reads_each_tables_schema_first(lake, monkeypatch):
    """Under the default policy every change applies: the batch's tables are not each loaded
    from the catalog to be checked (a batch into hundreds of tables would pay a load each)."""
    from cdc_ingest.schema import evolution

    checked: list[str] = []
    table_columns = evolution.table_columns  # type: ignore[attr-defined]

    def recorded(spark, identifier):
        checked.append(identifier.rsplit(".", 1)[-1].strip("`"))
        return table_columns(spark, identifier)

    monkeypatch.setattr(evolution, "table_columns", recorded)
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [row("INSERT", {"id": 1}), row("INSERT", {"id": 1}, "items")])
    lake.run("shop")
    lake.land(
        "shop", "002.json", [row("UPDATE", {"id": 1, "v1": "a"}), row("DELETE", {"id": 1}, "items")]
    )
    lake.run("shop")
    assert checked == []
    lake.add_pipeline("shop", "canal-json", schema_changes={"drop_column": "ignore"})
    lake.land(
        "shop", "003.json", [row("UPDATE", {"id": 1, "v1": "b"}), row("INSERT", {"id": 2}, "items")]
    )
    lake.run("shop")
    assert sorted(checked) == ["items", "orders"]
    assert lake.rows("orders") == [{"id": 1, "v1": "b"}]
