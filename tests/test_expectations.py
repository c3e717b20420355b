"""Expectations (``table_options``' ``expectations``): named checks of the row images with an
action each (warn, drop, fail), counted per rule in the summary, ``_cdc_batches``, the metrics
and the status page (docs/table-design.md)."""

from __future__ import annotations

import json
from itertools import count

import pytest
from canal_messages import canal_message
from cdc_ingest.config import ConfigError, load_config

TYPES = {"id": "INT", "qty": "INT", "status": "VARCHAR(10)", "amount": "INT", "v": "VARCHAR(10)"}
_es = count(1_700_000_000_000)

RULES = {
    "orders": {
        "expectations": {
            "positive_qty": {"check": "qty > 0", "on_violation": "drop"},
            "known_status": {"check": "status IN ('new', 'paid')", "on_violation": "warn"},
        }
    },
    "payments": {
        "expectations": {
            "amount_in_range": {"check": "amount BETWEEN 0 AND 999", "on_violation": "fail"}
        }
    },
}


def row(kind: str, data: dict, table: str = "orders") -> dict:
    typed = {c: TYPES[c] for c in data}
    return canal_message(table, kind, data, next(_es), typed)


def test_warn_applies_drop_dead_letters_and_fail_stops_only_its_table(lake):
    lake.add_pipeline("shop", "canal-json", table_options=RULES)
    lines = [
        row("INSERT", {"id": 1, "qty": 2, "status": "new"}),
        row("INSERT", {"id": 2, "qty": 0, "status": "new"}),  # drop: qty > 0 is false
        row("INSERT", {"id": 3, "qty": 5, "status": "lost"}),  # warn: applied, counted
        row("INSERT", {"id": 4, "qty": None, "status": "paid"}),  # null passes, as in CHECK
        row("INSERT", {"id": 1, "amount": 10}, "payments"),
        row("INSERT", {"id": 2, "amount": 5000}, "payments"),  # fail
        row("INSERT", {"id": 1, "v": "x"}, "items"),  # no expectations
    ]
    lake.land("shop", "001.json", lines)
    summary = lake.run("shop")

    assert lake.rows("orders", "id") == [{"id": 1}, {"id": 3}, {"id": 4}]
    assert lake.rows("items") == [{"id": 1, "v": "x"}]
    assert lake.rows("payments") == []
    orders, payments = summary.tables["orders"], summary.tables["payments"]
    assert (orders.inserted, orders.dead_lettered) == (3, 1)
    assert orders.expectations == {
        "known_status": {"on_violation": "warn", "violations": 1},
        "positive_qty": {"on_violation": "drop", "violations": 1},
    }
    assert payments.dead_lettered == 2
    assert payments.expectations["amount_in_range"] == {"on_violation": "fail", "violations": 1}
    assert summary.unaccounted() == []
    letters = [(x["target_table"], x["line"], x["reason"]) for x in lake.dead_letters()]
    stopped = (
        "table payments could not be applied: expectation amount_in_range "
        "(amount BETWEEN 0 AND 999) failed for 1 changes (on_violation: fail), e.g. id=2: "
        "nothing of the table's batch was applied"
    )
    assert letters == [
        ("orders", 2, "expectation positive_qty (qty > 0) failed"),
        ("payments", 5, stopped),
        ("payments", 6, stopped),
    ]
    text = summary.render()
    assert "orders: expectation positive_qty: 1 changes violated it (dead-lettered)" in text
    assert "orders: expectation known_status: 1 changes violated it (applied)" in text
    assert "payments: expectation amount_in_range: 1 changes violated it (stopped" in text

    # _cdc_batches keeps the counts per table; the metrics and the status page read them.
    [recorded] = lake.table("_cdc_batches").collect()
    counts = json.loads(recorded["table_counts"])
    assert counts["orders"]["expectations"]["positive_qty"]["violations"] == 1
    from cdc_ingest_airflow.metrics import batch_metrics
    from cdc_ingest_airflow.pipeline_status import gather
    from cdc_ingest_airflow.status_html import render

    sent = {name: value for _, name, value, _ in batch_metrics(json.loads(summary.to_json()), 0)}
    assert sent["cdc_ingest.shop.orders.expectation.positive_qty"] == 1
    assert sent["cdc_ingest.shop.payments.expectation.amount_in_range"] == 1
    [status] = gather(str(lake.config_path)).pipelines
    [shown] = [t for t in status.tables if t.name == "orders"]
    assert shown.expectations == {"known_status": ("warn", 1), "positive_qty": ("drop", 1)}
    page = render(gather(str(lake.config_path)))
    assert "<td>known_status: 1 (warn), positive_qty: 1 (drop)</td>" in page


def test_updates_are_checked_deletes_are_not_and_a_later_batch_of_the_failed_table_applies(lake):
    lake.add_pipeline("shop", "canal-json", table_options=RULES)
    first = [
        row("INSERT", {"id": 1, "qty": 2, "status": "new"}),
        row("INSERT", {"id": 2, "qty": 3, "status": "lost"}),
    ]
    lake.land("shop", "001.json", first)
    lake.run("shop")
    later = [
        row("UPDATE", {"id": 1, "qty": -1, "status": "paid"}),  # dropped: the row keeps qty 2
        row("DELETE", {"id": 2, "qty": 0, "status": "lost"}),  # a delete is not checked
        row("INSERT", {"id": 9, "amount": 50}, "payments"),
    ]
    lake.land("shop", "002.json", later)
    summary = lake.run("shop")
    assert lake.rows("orders") == [{"id": 1, "qty": 2, "status": "new"}]
    assert (summary.tables["orders"].deleted, summary.tables["orders"].dead_lettered) == (1, 1)
    assert summary.tables["orders"].expectations["known_status"]["violations"] == 0
    assert lake.rows("payments") == [{"id": 9, "amount": 50}]


def test_a_check_that_is_no_expression_over_the_columns_refuses_its_table_alone(lake):
    broken = {"orders": {"expectations": {"typo": {"check": "qtty > 0", "on_violation": "drop"}}}}
    lake.add_pipeline("shop", "canal-json", table_options=broken)
    lines = [
        row("INSERT", {"id": 1, "qty": 2, "status": "new"}),
        row("INSERT", {"id": 1, "v": "x"}, "items"),
    ]
    lake.land("shop", "001.json", lines)
    summary = lake.run("shop")
    assert summary.tables["orders"].dead_lettered == 1 and lake.rows("items") == [
        {"id": 1, "v": "x"}
    ]
    [letter] = [x for x in lake.dead_letters() if x["target_table"] == "orders"]
    assert "expectations of table orders are not Spark SQL boolean expressions" in letter["reason"]
    assert "typo (qtty > 0)" in letter["reason"]


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"check": "qty > 0", "on_violation": "quarantine"}, "must be one of warn, drop, fail"),
        ({"check": " "}, "expected a Spark SQL boolean expression"),
        ({"check": "qty > 0", "action": "drop"}, "expected {check: ..., on_violation: ...}"),
    ],
)
def test_expectations_are_checked_when_the_file_is_loaded(lake, rule, message):
    lake.add_pipeline("shop", "canal-json", table_options={"orders": {"expectations": {"r": rule}}})
    with pytest.raises(ConfigError, match=message):
        load_config(lake.config_path)
