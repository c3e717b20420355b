"""DDL applied at its position in the stream, whole or not at all, under the pipeline's policy."""

from __future__ import annotations

import json
from itertools import count

import pytest
from canal_messages import canal_message, ddl_message
from cdc_ingest.schema.evolution import SchemaChangeRefused
from lakehouses import LAKEHOUSES

TYPES = {"id": "INT", "v1": "VARCHAR(10)", "v2": "INT", "price": "DECIMAL(5,2)"}
_es = count(1_700_000_000_000)


def row(kind: str, data: dict, table: str = "orders", **types: str) -> dict:
    """A Canal row message typed by the columns it carries."""
    typed = {c: types.get(c) or TYPES.get(c, "VARCHAR(10)") for c in data}
    return canal_message(table, kind, data, next(_es), typed)


def ddl(sql: str, table: str = "orders", kind: str = "ALTER") -> dict:
    return ddl_message(table, sql, kind, next(_es))


def history(lake) -> list[tuple]:
    rows = lake.table("_cdc_ddl_history").orderBy("file", "line").collect()
    return [(r["target_table"], r["status"], r["detail"]) for r in rows]


def columns(lake, table: str = "orders") -> list[str]:
    return [c for c in lake.table(table).columns if not c.startswith("_cdc_")]


@pytest.mark.parametrize("lake", LAKEHOUSES, indirect=True)
def test_statements_take_effect_exactly_at_their_position_in_one_batch(lake):
    lake.add_pipeline("shop", "canal-json")
    lines = [
        row("INSERT", {"id": 0, "v1": "zero"}),
        row("INSERT", {"id": 1, "v1": "one"}),
        ddl("/* DMS */ ALTER TABLE orders ADD COLUMN v2 INT"),
        row("INSERT", {"id": 2, "v1": "two", "v2": 20}),
        row("UPDATE", {"id": 1, "v1": "one", "v2": 10}),
        ddl("ALTER TABLE orders DROP COLUMN v1"),
        row("INSERT", {"id": 3, "v2": 30}),
        row("UPDATE", {"id": 2, "v2": 21}),
    ]
    lake.land("shop", "001.json", lines)
    summary = lake.run("shop")
    assert (summary.messages, summary.dead_lettered, summary.ddl_applied) == (8, 0, 2)
    assert columns(lake) == ["id", "v2"]
    assert lake.rows("orders") == [
        {"id": 0, "v2": None},  # inserted before the column existed
        {"id": 1, "v2": 10},
        {"id": 2, "v2": 21},
        {"id": 3, "v2": 30},
    ]
    assert history(lake) == [
        ("orders", "applied", "added v2 bigint"),
        ("orders", "applied", "dropped v1"),
    ]
    rendered = summary.render()
    assert "2 DDL records kept in _cdc_ddl_history: 2 applied, 0 rejected" in rendered
    assert "orders: ALTER TABLE orders DROP COLUMN v1 -> applied: dropped v1" in rendered


def test_a_delete_before_a_statement_still_stops_a_late_insert_after_it_in_one_batch(lake):
    """The tombstone the first segment writes is seen by the next segment of the same batch."""
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [row("INSERT", {"id": 0, "v1": "zero"})])
    lake.run("shop")
    first = row("INSERT", {"id": 1, "v1": "one"})
    late = row("INSERT", {"id": 1, "v1": "late"})
    late["es"] = first["es"]  # sent before the delete, landed after it
    lines = [
        first,
        row("DELETE", {"id": 1, "v1": "one"}),
        ddl("ALTER TABLE orders ADD COLUMN v2 INT"),
        late,
    ]
    lake.land("shop", "002.json", lines)
    summary = lake.run("shop")

    assert summary.tables["orders"].older == 1
    assert lake.rows("orders") == [{"id": 0, "v1": "zero", "v2": None}]


def test_rename_and_widen_columns_and_truncate_at_its_position(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [row("INSERT", {"id": 1, "v1": "a", "price": "1.50"})])
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            ddl("ALTER TABLE orders RENAME COLUMN v1 TO label, MODIFY price DECIMAL(9,2)"),
            row("INSERT", {"id": 2, "label": "b", "price": "1234567.25"}),
            ddl("TRUNCATE TABLE orders", kind="TRUNCATE"),
            row("INSERT", {"id": 3, "label": "c", "price": "2.00"}),
        ],
    )
    summary = lake.run("shop")
    types = {f.name: f.dataType.simpleString() for f in lake.table("orders").schema.fields}
    assert (types["label"], types["price"]) == ("string", "decimal(9,2)") and "v1" not in types
    assert lake.rows("orders", "id", "label") == [{"id": 3, "label": "c"}]
    assert summary.ddl_applied == 2
    assert [h[2] for h in history(lake)] == [
        "renamed v1 to label; widened price to decimal(9,2)",
        "removed every row",
    ]


def test_narrowing_or_unreadable_statements_are_rejected_whole_and_the_batch_goes_on(lake):
    lake.add_pipeline("shop", "canal-json")
    lines = [
        row("INSERT", {"id": 1, "v1": "a"}),
        ddl("ALTER TABLE orders ADD COLUMN v2 INT, MODIFY v1 INT"),  # string -> bigint narrows
        ddl("ALTER TABLE orders FROBNICATE"),
        row("INSERT", {"id": 2, "v1": "b"}),
    ]
    lake.land("shop", "001.json", lines)
    summary = lake.run("shop")
    assert summary.ddl_rejected == 2 and summary.dead_lettered == 0
    assert columns(lake) == ["id", "v1"]  # not even the ADD COLUMN of the rejected statement
    assert lake.rows("orders") == [{"id": 1, "v1": "a"}, {"id": 2, "v1": "b"}]
    statuses = history(lake)
    assert [s[1] for s in statuses] == ["rejected", "rejected"]
    assert "column 'v1': string -> bigint would narrow or change the type" in statuses[0][2]
    assert "cannot understand the clause 'FROBNICATE'" in statuses[1][2]
    assert "-> rejected:" in summary.render()


def test_index_and_comment_statements_change_nothing_and_are_recorded(lake):
    lake.add_pipeline("shop", "canal-json")
    lines = [row("INSERT", {"id": 1, "v1": "a"}), ddl("ALTER TABLE orders ADD INDEX i (v1)")]
    lake.land("shop", "001.json", lines)
    lake.run("shop")
    [(_, status, detail)] = history(lake)
    assert status == "no_change" and "ADD INDEX i (v1)" in detail


def test_create_table_creates_it_with_its_key_and_rename_table_is_followed(lake):
    lake.add_pipeline("shop", "canal-json")
    lines = [
        ddl(
            "CREATE TABLE items (id INT, name VARCHAR(20), PRIMARY KEY (id))",
            table="items",
            kind="CREATE",
        ),
        row("INSERT", {"id": 1, "v1": "a"}),
        ddl("RENAME TABLE orders TO orders_v2", kind="RENAME"),
        row("INSERT", {"id": 2, "v1": "b"}, table="orders_v2"),
    ]
    lake.land("shop", "001.json", lines)
    lake.run("shop")
    assert lake.rows("orders_v2") == [{"id": 1, "v1": "a"}, {"id": 2, "v1": "b"}]
    assert columns(lake, "items") == ["id", "name"]
    tables = {
        r["tableName"] for r in lake.spark.sql(f"SHOW TABLES IN {lake.catalog}.ods").collect()
    }
    assert "orders" not in tables


def test_ignore_keeps_the_schema_and_counts_the_dropped_values(lake):
    lake.add_pipeline("shop", "canal-json", schema_changes="ignore")
    lake.land("shop", "001.json", [row("INSERT", {"id": 1, "v1": "a"})])
    lake.run("shop")
    lines = [
        ddl("ALTER TABLE orders ADD COLUMN v2 INT"),
        row("INSERT", {"id": 2, "v1": "b", "v2": 20}),
        row("INSERT", {"id": 3, "v1": "c", "v2": 30}),
    ]
    lake.land("shop", "002.json", lines)
    summary = lake.run("shop")
    assert columns(lake) == ["id", "v1"]
    assert lake.rows("orders") == [
        {"id": 1, "v1": "a"},
        {"id": 2, "v1": "b"},
        {"id": 3, "v1": "c"},
    ]
    assert summary.ignored_values == 2
    assert history(lake) == [("orders", "ignored", "schema_changes add_column: ignore")]


def test_fail_stops_the_batch_before_any_change_and_says_why(lake):
    lake.add_pipeline("shop", "canal-json", schema_changes="fail")
    lake.land("shop", "001.json", [row("INSERT", {"id": 1, "v1": "a"})])
    lake.run("shop")
    lines = [row("INSERT", {"id": 2, "v1": "b"}), ddl("ALTER TABLE orders ADD COLUMN v2 INT")]
    lake.land("shop", "002.json", lines)
    with pytest.raises(SchemaChangeRefused, match="schema_changes is 'fail'") as refused:
        lake.run("shop")
    assert "ALTER TABLE orders ADD COLUMN v2 INT" in str(refused.value)
    assert lake.rows("orders") == [{"id": 1, "v1": "a"}]  # not even the insert before it
    assert history(lake) == [
        ("orders", "failed", "schema_changes: fail; the batch was stopped before any change")
    ]


def test_seed_002_alter_adds_the_column_to_a_keyless_datahub_table(lake):
    from conftest import FIXTURES

    insert = json.loads((FIXTURES / "datahub-blob" / "insert.jsonl").read_text())
    del insert["schema"]["primaryKey"]
    insert["schema"]["source"]["tableName"] = "t_test_nopk"
    alter = (FIXTURES / "datahub-blob" / "alter.jsonl").read_text().strip()
    after = json.loads(json.dumps(insert))
    after["payload"]["after"]["dataColumn"].update(id=2, holo="new text")
    after["schema"]["dataColumn"].append({"name": "holo", "type": "STRING"})
    lake.add_pipeline("blob", "datahub-blob", table="{table}")
    lake.land("blob", "001.json", [json.dumps(insert), alter, json.dumps(after)])
    summary = lake.run("blob")
    assert summary.ddl_applied == 1
    assert lake.rows("t_test_nopk", "id", "holo") == [
        {"id": 1, "holo": None},
        {"id": 2, "holo": "new text"},
    ]


def test_a_wider_type_in_the_messages_widens_the_column_without_ddl(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [row("INSERT", {"id": 1, "price": "1.50"})])
    lake.run("shop")
    wider = row("INSERT", {"id": 2, "price": "1234567.25"}, price="DECIMAL(9,2)")
    lake.land("shop", "002.json", [wider])
    summary = lake.run("shop")
    assert summary.dead_lettered == 0, summary.dead_letter_samples
    types = {f.name: f.dataType.simpleString() for f in lake.table("orders").schema.fields}
    assert types["price"] == "decimal(9,2)"
    assert [str(r["price"]) for r in lake.rows("orders", "price")] == ["1.50", "1234567.25"]


def test_a_dropped_source_table_is_kept_and_no_longer_changed_until_created_again(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "001.json", [row("INSERT", {"id": 1, "v1": "a"})])
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [ddl("DROP TABLE orders", kind="ERASE"), row("INSERT", {"id": 2, "v1": "late"})],
    )
    dropped = lake.run("shop")
    assert lake.rows("orders") == [{"id": 1, "v1": "a"}]
    assert dropped.tables["orders"].source_dropped == 1
    lake.land("shop", "003.json", [row("INSERT", {"id": 3, "v1": "later"})])
    assert lake.run("shop").tables["orders"].source_dropped == 1
    assert lake.rows("orders") == [{"id": 1, "v1": "a"}]
    lake.land(
        "shop",
        "004.json",
        [
            ddl("CREATE TABLE orders (id INT PRIMARY KEY, v1 VARCHAR(10))", kind="CREATE"),
            row("INSERT", {"id": 4, "v1": "new"}),
        ],
    )
    lake.run("shop")
    assert lake.rows("orders") == [{"id": 4, "v1": "new"}]
    assert [h[1] for h in history(lake)] == ["applied", "applied"]


def test_a_statement_changes_the_table_it_names_not_the_table_its_message_is_filed_under(lake):
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "001.json",
        [row("INSERT", {"id": 1, "v1": "a"}), row("INSERT", {"id": 1, "v1": "x"}, table="items")],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            # Canal files a DDL under the table of the connection's last statement.
            ddl("DROP TABLE items", table="orders", kind="ERASE"),
            ddl("ALTER TABLE `Items2` ADD COLUMN v2 INT", table="orders"),
            row("INSERT", {"id": 2, "v1": "b"}),
            row("INSERT", {"id": 2, "v1": "y"}, table="items"),
        ],
    )

    summary = lake.run("shop")

    assert lake.rows("orders") == [{"id": 1, "v1": "a"}, {"id": 2, "v1": "b"}]
    assert summary.tables["orders"].inserted == 1
    assert summary.tables["items"].source_dropped == 1
    assert lake.rows("items") == [{"id": 1, "v1": "x"}]
    assert history(lake) == [
        (
            "items",
            "applied",
            "source table dropped: the mirror is kept and receives no more changes",
        ),
        ("items2", "no_change", "no such table in the mirror yet"),
    ]


def test_a_table_renamed_to_a_path_like_name_gets_the_name_rules_of_message_tables(lake):
    lake.add_pipeline("shop", "canal-json", table="{db}_{table}")
    lake.land("shop", "001.json", [row("INSERT", {"id": 1, "v1": "a"})])
    lake.run("shop")
    lake.land(
        "shop",
        "002.json",
        [
            ddl("RENAME TABLE orders TO `../Évil`", kind="RENAME"),
            row("INSERT", {"id": 2, "v1": "b"}, table="../Évil"),
        ],
    )

    lake.run("shop")

    assert lake.rows("shop____évil") == [{"id": 1, "v1": "a"}, {"id": 2, "v1": "b"}]
    tables = {
        r["tableName"] for r in lake.spark.sql(f"SHOW TABLES IN {lake.catalog}.ods").collect()
    }
    assert "shop_orders" not in tables
    assert (lake.root / "warehouse").exists()
    assert not list(lake.root.glob("**/Évil*")) and not list(lake.root.glob("**/evil*"))
