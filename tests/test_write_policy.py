"""Where ``WritePolicy`` sends a prepared table, and which writer writes it: each case's route
written by hand from the policy's rules (docs/development.md, "Adding a write route")."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from cdc_ingest.apply.write_policy import WritePolicy
from cdc_ingest.catalog.config import CatalogConfig
from cdc_ingest.contract import ColumnType
from cdc_ingest.schema.target import TargetTable
from cdc_ingest.snapshots.arrow_catalog import ArrowCatalog
from cdc_ingest.table_options import HistoryOptions
from cdc_ingest.writers.pyiceberg_writer import PyicebergWriter
from cdc_ingest.writers.spark_writer import SparkWriter

POLICY = WritePolicy(group_rows=100)


def _table(**design: Any) -> TargetTable:
    target = TargetTable(
        name="orders",
        identifier="`lake`.`ods`.`orders`",
        keys=("id",),
        columns={"id": ColumnType("bigint"), "v": ColumnType("string")},
        tombstones="`lake`.`ods`.`_cdc_tombstones`",
    )
    return dataclasses.replace(target, **design)


UNSENT = _table(unavailable_values=("v",))
REFUSED = _table(refused_columns={"V": "column 'V': ..."})
HISTORY = _table(history=HistoryOptions("orders_history"))


@pytest.mark.parametrize(
    ("case", "table", "created", "rows", "tombstoned", "resumed", "fanned_out", "route"),
    [
        ("a new small keyed table", _table(), True, 99, False, False, False, "fresh group"),
        ("a new table over a deleted one", _table(), True, 99, True, False, False, "alone"),
        ("a small table with rows", _table(), False, 99, True, False, False, "existing group"),
        ("a resumed batch's table with rows", _table(), False, 99, False, True, False, "alone"),
        ("a resumed batch's new table", _table(), True, 99, False, True, False, "fresh group"),
        ("group_rows changes", _table(), True, 100, False, False, False, "alone"),
        ("keyless", _table(keys=()), True, 1, False, False, False, "alone"),
        ("moved keys", _table(moves_keys=True), False, 1, False, False, False, "alone"),
        ("unsent values", UNSENT, False, 1, False, False, False, "alone"),
        ("refused columns", REFUSED, True, 1, False, False, False, "alone"),
        ("a dropped source", _table(source_dropped=True), False, 1, False, False, False, "alone"),
        ("history", HISTORY, True, 1, False, False, False, "alone"),
        ("deletes naming no table", _table(), False, 1, False, False, True, "alone"),
    ],
)
def test_each_prepared_table_takes_the_route_its_rules_give(
    case, table, created, rows, tombstoned, resumed, fanned_out, route
):
    assert POLICY.route(table, created, rows, tombstoned, resumed, fanned_out) == route, case


def _writers() -> tuple[SparkWriter, PyicebergWriter]:
    by_spark = SparkWriter(spark=None, catalog="lake")  # type: ignore[arg-type]
    config = CatalogConfig(name="lake", uri="sqlite:////nowhere.db", warehouse="file:///nowhere")
    return by_spark, PyicebergWriter(by_spark, ArrowCatalog(config))


def test_lineage_writes_the_mirrors_by_spark_and_nothing_else_changes_the_writer():
    by_spark, pyiceberg = _writers()
    assert WritePolicy().mirrors_writer(pyiceberg) is pyiceberg
    assert WritePolicy(pyiceberg=False).mirrors_writer(pyiceberg) is by_spark
    assert WritePolicy(pyiceberg=False).mirrors_writer(by_spark) is by_spark


def test_a_group_of_one_is_kept_only_for_a_writer_that_writes_it_without_spark():
    by_spark, pyiceberg = _writers()
    assert POLICY.keeps_group(pyiceberg, _table(), created=True)
    assert not POLICY.keeps_group(by_spark, _table(), created=True)
    assert not POLICY.keeps_group(by_spark, _table(), created=False)
