"""An existing table's columns and properties read through pyiceberg (one load) are those Spark
reports (a schema and ``SHOW TBLPROPERTIES``), so that preparing a table and comparing its design
with its options give the same answer either way."""

from __future__ import annotations

import pytest
from canal_messages import canal_message
from cdc_ingest.config import load_config
from cdc_ingest.snapshots.arrow_catalog import ArrowCatalog
from cdc_ingest.state.tables import qualified, table_columns, table_properties
from lakehouses import JDBC_FILE, REST_S3

TYPES = {
    "id": "BIGINT",
    "amount": "DECIMAL(12,2)",
    "created": "DATETIME",
    "day": "DATE",
    "ratio": "DOUBLE",
    "note": "VARCHAR(20)",
}
ROW = {
    "id": 1,
    "amount": "2.50",
    "created": "2026-03-04 05:06:07",
    "day": "2026-03-04",
    "ratio": 0.5,
    "note": "n",
}
DESIGN = {
    "partition_by": ["bucket(4, id)"],
    "sort_by": ["note DESC"],
    "properties": {"format-version": "2", "write.target-file-size-bytes": "1048576"},
}
# What SHOW TBLPROPERTIES lists besides a table's properties, from Iceberg's SparkTable: not
# compared with table options (``format-version`` is, and pyiceberg gives it).
SPARK_ONLY = {"current-snapshot-id", "format", "identifier-fields", "location", "provider"}
SPARK_ONLY |= {"sort-order"}


@pytest.mark.parametrize("lake", [JDBC_FILE, REST_S3], indirect=True)
def test_a_tables_facts_through_pyiceberg_are_those_spark_reports(lake):
    lake.add_pipeline("shop", "canal-json", table_options={"orders": DESIGN})
    lake.land("shop", "a.json", [canal_message("orders", "INSERT", ROW, 1, TYPES)])
    lake.run("shop")
    identifier = qualified(lake.catalog, "ods", "orders")
    lake.table("orders")  # registers the test's catalog on the shared session

    facts = ArrowCatalog(load_config(lake.config_path).catalog).table_facts(identifier)

    assert facts is not None
    columns, properties = facts
    assert columns == table_columns(lake.spark, identifier)
    assert columns["amount"] == "decimal(12,2)" and columns["_cdc_order"] == "binary"
    spark_properties = table_properties(lake.spark, identifier)
    assert properties == {k: v for k, v in spark_properties.items() if k not in SPARK_ONLY}
    assert properties["format-version"] == "2"


def test_an_unchanged_design_with_a_format_version_reports_no_change(lake):
    lake.add_pipeline("shop", "canal-json", table_options={"orders": DESIGN})
    lake.land("shop", "a.json", [canal_message("orders", "INSERT", ROW, 1, TYPES)])
    lake.run("shop")
    lake.land("shop", "b.json", [canal_message("orders", "UPDATE", {**ROW, "note": "m"}, 2, TYPES)])

    second = lake.run("shop")

    assert second.tables["orders"].updated == 1
    assert second.tables["orders"].design_changes == []
