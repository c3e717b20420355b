"""Table design (``table_options``, ``deletes``): partition spec, write order, properties, computed
columns and delete modes, through the whole job, read back with pyiceberg."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
from cdc_ingest.config import ConfigError, load_config
from cdc_ingest.table_options import PartitionField, SortField, parse_layer

_es = itertools.count(1_000)


def change(kind: str, data: dict[str, Any], table: str = "orders", es: int | None = None) -> dict:
    """A Canal message of one row: id INT, region VARCHAR, amount DECIMAL(10,2), created DATE."""
    types = {"id": "INT", "region": "VARCHAR(8)", "amount": "DECIMAL(10,2)", "created": "DATE"}
    return {
        "data": [data],
        "database": "shop",
        "es": next(_es) if es is None else es,
        "isDdl": False,
        "mysqlType": {c: types.get(c, "VARCHAR(10)") for c in data},
        "old": None,
        "pkNames": ["id"],
        "sql": "",
        "table": table,
        "type": kind,
    }


def order(i: int, region: str, amount: str = "1.50", created: str = "2026-03-04") -> dict:
    return {"id": str(i), "region": region, "amount": amount, "created": created}


def pyiceberg_table(lake, name: str):
    from cdc_ingest.state.lake import open_catalog

    return open_catalog(load_config(lake.config_path).catalog).load_table(f"ods.{name}")


# --- configuration ------------------------------------------------------------------------------


def test_table_options_are_validated_and_layered(tmp_path):
    path = tmp_path / "pipelines.yaml"

    def load(pipeline_extra: str):
        path.write_text(
            "catalog: {name: lake, uri: 'sqlite:////tmp/x.db', warehouse: 'file:///tmp/w'}\n"
            "pipelines:\n"
            "  - {name: p, format: canal-json, landing: 'file:///tmp/l', namespace: ods"
            + pipeline_extra
            + "}\n"
        )
        return load_config(path).pipeline("p")

    pipeline = load(
        ", deletes: soft, table_options: {'*': {properties: {write.target-file-size-bytes: 1024},"
        " partition_by: [region]}, orders: {partition_by: ['bucket(8, id)', 'day(created)'],"
        " properties: {write.parquet.compression-codec: snappy}, deletes: ignore}}"
    )
    orders, other = pipeline.tables.for_table("orders"), pipeline.tables.for_table("other")
    assert orders.partition_by == (
        PartitionField("bucket", "id", 8),
        PartitionField("days", "created"),
    )
    assert orders.properties == {
        "write.target-file-size-bytes": "1024",
        "write.parquet.compression-codec": "snappy",
    }
    assert (orders.deletes, other.deletes) == ("ignore", "soft")
    assert other.partition_by == (PartitionField("identity", "region"),)
    with pytest.raises(
        ConfigError,
        match=r"write.target-file-size: not an Iceberg table "
        r"property \(did you mean 'write.target-file-size-bytes'\?\)",
    ):
        load(", table_options: {'*': {properties: {write.target-file-size: 1}}}")
    with pytest.raises(ConfigError, match="deletes: 'keep' must be one of apply, ignore, soft"):
        load(", deletes: keep")
    with pytest.raises(ConfigError, match=r"format-version: '1' must be one of 2, 3"):
        load(", table_options: {t: {properties: {format-version: 1}}}")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"partition_by": ["bucket(id)"]}, "is not an Iceberg transform"),
        ({"partition_by": ["bucket(0, id)"]}, "the width must be at least 1"),
        ({"sort_by": ["id sideways"]}, "is not a sort field"),
        ({"computed_columns": {"_cdc_x": "1"}}, "not starting with _cdc_"),
        ({"properties": {"cdc.keys": "id"}}, "cdc.* properties are set by the job"),
        ({"properties": {"write.merge.mode": "in-place"}}, "copy-on-write, merge-on-read"),
        (
            {"partitions": ["id"]},
            r"table_options.orders: unknown key 'partitions' \(keys: partition_by, ",
        ),
    ],
)
def test_a_malformed_table_option_names_itself(raw, message):
    with pytest.raises(ConfigError, match=message):
        parse_layer(raw, "table_options.orders")


def test_sort_fields_spell_out_iceberg_default_null_order():
    assert SortField("id").text == "id ASC NULLS FIRST"
    assert SortField("id", descending=True).text == "id DESC NULLS LAST"
    assert SortField("id", descending=True, nulls_first=True).sql() == "`id` DESC NULLS FIRST"


# --- creation and evolution ----------------------------------------------------------------------


def test_a_new_table_gets_its_spec_order_properties_and_computed_columns(lake):
    from pyiceberg.table.sorting import NullOrder, SortDirection

    lake.add_pipeline(
        "shop",
        "canal-json",
        table_options={
            "*": {"properties": {"write.parquet.compression-codec": "snappy"}},
            "orders": {
                "partition_by": ["bucket(4, id)", "months(created)"],
                "sort_by": ["region DESC NULLS LAST"],
                "computed_columns": {"cents": "cast(amount * 100 as bigint)"},
                "properties": {"write.target-file-size-bytes": "1048576"},
            },
        },
    )
    lake.land("shop", "a.json", [change("INSERT", order(1, "eu", "2.25", "2026-03-04"))])
    summary = lake.run("shop")
    assert summary.tables["orders"].inserted == 1
    table = pyiceberg_table(lake, "orders")
    schema = table.schema()
    spec = [(str(f.transform), schema.find_column_name(f.source_id)) for f in table.spec().fields]
    assert spec == [("bucket[4]", "id"), ("month", "created")]
    [sort] = table.sort_order().fields
    assert (schema.find_column_name(sort.source_id), sort.direction, sort.null_order) == (
        "region",
        SortDirection.DESC,
        NullOrder.NULLS_LAST,
    )
    assert table.properties["write.parquet.compression-codec"] == "snappy"
    assert table.properties["write.target-file-size-bytes"] == "1048576"
    assert table.properties["write.merge.mode"] == "merge-on-read"  # the job's default stays
    [row] = table.scan(selected_fields=("id", "amount", "created", "cents")).to_arrow().to_pylist()
    assert row["cents"] == 225 and row["created"] == dt.date(2026, 3, 4)


def test_a_changed_design_evolves_the_existing_table_for_new_data(lake):
    lake.add_pipeline("shop", "canal-json", table_options={"orders": {"partition_by": ["region"]}})
    lake.land(
        "shop", "a.json", [change("INSERT", order(1, "eu")), change("INSERT", order(2, "us"))]
    )
    first = lake.run("shop")
    assert first.tables["orders"].design_changes == []
    lake.add_pipeline(
        "shop",
        "canal-json",
        table_options={
            "orders": {
                "partition_by": ["region", "bucket(2, id)"],
                "sort_by": ["id"],
                "properties": {"write.target-file-size-bytes": "2097152"},
                "computed_columns": {"big": "amount > 100"},
            }
        },
    )
    lake.land("shop", "b.json", [change("INSERT", order(3, "eu", "250.00"))])
    second = lake.run("shop")
    assert second.tables["orders"].design_changes == [
        "computed column big added",
        "partition spec [region] -> [region, bucket(2, id)] (new data only: written files keep "
        "their spec)",
        "write order [] -> [id ASC NULLS FIRST] (new data only)",
        "property write.target-file-size-bytes: None -> 2097152",
    ]
    assert "    orders: partition spec [region] -> [region, bucket(2, id)]" in second.render()
    table = pyiceberg_table(lake, "orders")
    assert len(table.specs()) == 2
    files = table.inspect.files().select(["spec_id", "record_count"]).to_pylist()
    # The two rows of the first batch stay in their files of the first spec; the new row is in a
    # file of the new one.
    assert sorted((f["spec_id"], f["record_count"]) for f in files) == [(0, 1), (0, 1), (1, 1)]
    rows = {r["id"]: r["big"] for r in lake.rows("orders", "id", "big")}
    assert rows == {1: None, 2: None, 3: True}
    # Nothing changed since: nothing is reported.
    lake.land("shop", "c.json", [change("INSERT", order(4, "us"))])
    assert lake.run("shop").tables["orders"].design_changes == []


def test_a_merge_into_a_partitioned_table_touches_only_the_changed_partition(lake):
    lake.add_pipeline("shop", "canal-json", table_options={"orders": {"partition_by": ["region"]}})
    regions = ["eu", "us", "ap", "sa"]
    lake.land("shop", "a.json", [change("INSERT", order(i, regions[i % 4])) for i in range(40)])
    lake.run("shop")
    table = pyiceberg_table(lake, "orders")
    assert len(table.inspect.files()) == 4  # one data file per region
    # Ids 0, 4 and 8 are in "eu": two updates and a delete.
    lake.land(
        "shop",
        "b.json",
        [
            change("UPDATE", order(0, "eu", "9.00")),
            change("UPDATE", order(4, "eu", "9.00")),
            change("DELETE", order(8, "eu")),
        ],
    )
    summary = lake.run("shop")
    assert (summary.tables["orders"].updated, summary.tables["orders"].deleted) == (2, 1)
    table = pyiceberg_table(lake, "orders")
    merge = table.current_snapshot()
    assert merge is not None and merge.summary is not None
    assert merge.summary.operation.value == "overwrite"
    assert merge.summary["changed-partition-count"] == "1"
    assert merge.summary["added-position-delete-files"] == "1"
    assert merge.summary["added-data-files"] == "1"
    deletes = table.inspect.delete_files().select(["partition"]).to_pylist()
    assert [d["partition"] for d in deletes] == [{"region": "eu"}]


# --- delete modes --------------------------------------------------------------------------------


def test_soft_deletes_keep_the_row_flagged_and_a_newer_insert_revives_it(lake):
    lake.add_pipeline("shop", "canal-json", deletes="soft")
    lake.land(
        "shop",
        "a.json",
        [change("INSERT", order(1, "eu"), es=10), change("INSERT", order(2, "us"), es=11)],
    )
    lake.run("shop")
    lake.land(
        "shop",
        "b.json",
        [change("DELETE", order(1, "eu"), es=20), change("DELETE", order(9, "ap"), es=21)],
    )
    deleted = lake.run("shop")
    counts = deleted.tables["orders"]
    assert (counts.deleted, counts.deleted_absent) == (1, 1)
    flags = {r["id"]: r["_cdc_deleted"] for r in lake.rows("orders", "id", "_cdc_deleted")}
    assert flags == {1: True, 2: False}
    [gone] = [r for r in lake.rows("orders", "id", "_cdc_batch_id", "_cdc_op") if r["id"] == 1]
    assert (gone["_cdc_batch_id"], gone["_cdc_op"]) == (deleted.batch_id, "DELETE")
    # An insert older than the delete stays out; a newer one revives the row with its values.
    lake.land("shop", "c.json", [change("INSERT", order(1, "eu", "5.00"), es=15)])
    assert lake.run("shop").tables["orders"].older == 1
    lake.land("shop", "d.json", [change("INSERT", order(1, "eu", "7.00"), es=30)])
    revived = lake.run("shop").tables["orders"]
    assert (revived.inserted, revived.updated) == (1, 0)
    rows = {
        r["id"]: (str(r["amount"]), r["_cdc_deleted"])
        for r in lake.rows("orders", "id", "amount", "_cdc_deleted")
    }
    assert rows == {1: ("7.00", False), 2: ("1.50", False)}
    # Revived in place: an insert into a soft-deleted row's key is merged, never appended.
    assert len(lake.rows("orders", "id")) == 2


def test_options_that_do_not_fit_a_table_dead_letter_its_changes_only(lake):
    lake.add_pipeline(
        "shop",
        "canal-json",
        table_options={"bad": {"partition_by": ["days(region)"]}},
    )
    lake.land(
        "shop",
        "a.json",
        [change("INSERT", order(1, "eu"), table="bad"), change("INSERT", order(2, "us"))],
    )
    summary = lake.run("shop")
    assert summary.tables["orders"].inserted == 1
    assert summary.tables["bad"].dead_lettered == 1
    [letter] = lake.dead_letters()
    assert letter["reason"] == (
        "table bad could not be applied: partition_by days(region): days does not take a "
        "string column"
    )


# --- history options ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"history": "scd4"}, "history: 'scd4' must be one of none, scd2"),
        ({"history_columns": []}, "history_columns: expected a list of column names"),
        ({"history_table": "archive"}, "expected a name containing {table}"),
        ({"history_table": "{table}"}, "must name another table of the namespace"),
        ({"history_table": "_cdc_{table}"}, "must name another table of the namespace"),
        ({"history_table": "{table}_{name}"}, "may hold only {table} in braces"),
    ],
)
def test_a_malformed_history_option_names_itself(raw, message):
    with pytest.raises(ConfigError, match=message.replace("{", r"\{").replace("}", r"\}")):
        parse_layer(raw, "table_options.users")


def _pipeline_options(table_options):
    from cdc_ingest.config import PipelineConfig

    return PipelineConfig("p", "lindorm", "file:///l", "ods", table_options=table_options).tables


def test_a_tables_tracking_list_replaces_the_pipelines_and_names_its_history_table():
    options = _pipeline_options(
        {
            "*": {"history": "scd2", "history_except_columns": ["seen_at"]},
            "users": {"history_columns": ["Name", "city"], "history_table": "hist_{table}"},
            "logs": {"history": "none"},
        }
    )
    users = options.for_table("users").history_of("users")
    orders = options.for_table("orders").history_of("orders")
    assert users is not None and orders is not None
    assert users.table == "hist_users"
    assert users.tracked(["id", "name", "city", "seen_at"]) == ["name", "city"]
    assert orders.table == "orders_history"
    assert orders.tracked(["id", "total", "seen_at"]) == ["id", "total"]
    assert options.history_tables(["logs", "orders", "users"]) == {
        "orders": "orders_history",
        "users": "hist_users",
    }


def test_a_history_tables_name_is_known_as_taken_whatever_its_template():
    options = _pipeline_options(
        {
            "*": {"history": "scd2"},
            "users": {"history_table": "{table}_v_{table}"},
            "logs": {"history": "none"},
        }
    )
    assert options.history_owner("orders_history") == "orders"
    assert options.history_owner("Orders_History") == "Orders"
    assert options.history_owner("users_v_users") == "users"
    # users keeps its history elsewhere, logs keeps none, and no template makes these.
    assert options.history_owner("users_history") is None
    assert options.history_owner("logs_history") is None
    assert options.history_owner("users_v_logs") is None
    assert options.history_owner("orders") is None
