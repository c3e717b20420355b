"""Tables applied each by a plan of its own (``apply/alone_tables.py``: too many changes for a
group, moved keys, unsent values) are applied several at once, each still a commit of its own
with its own counts and its refusal its own; their tombstones are committed one at a time into
the namespace's one tombstones table."""

from __future__ import annotations

import json
import threading
from typing import Any

from canal_messages import outcomes, row_message

NAMES = ("orders", "items", "stock")


def _three_tables_applied_alone(lake: Any, monkeypatch: Any) -> None:
    """Three tables holding rows, each with an update and a delete in the second batch, none
    fitting a group."""
    from cdc_ingest.apply import fresh_tables

    monkeypatch.setattr(fresh_tables, "GROUP_ROWS", 0)
    lake.add_pipeline("shop", "canal-json")
    first = [
        row_message(name, "INSERT", {"id": key, "v": f"{name}{key}"}, 10 + key)
        for name in NAMES
        for key in (1, 2, 3)
    ]
    lake.land("shop", "001.json", first)
    lake.run("shop")
    second = [
        message
        for n, name in enumerate(NAMES)
        for message in (
            row_message(name, "UPDATE", {"id": 1, "v": f"{name}1-new"}, 20 + n),
            row_message(name, "DELETE", {"id": 2, "v": f"{name}2"}, 30 + n),
        )
    ]
    lake.land("shop", "002.json", second)


def test_tables_applied_alone_are_applied_at_once_tombstones_one_commit_at_a_time(
    lake, monkeypatch
):
    from cdc_ingest.apply import keyed
    from cdc_ingest.apply.keyed_writes import append_tombstones, merge_target

    _three_tables_applied_alone(lake, monkeypatch)
    # Each MERGE waits for the other two to start: applied one after another, the first would
    # wait out the barrier's timeout and the batch fail.
    all_started = threading.Barrier(3, timeout=120)
    pools: set[str] = set()

    def meeting(spark: Any, *args: Any, **kwargs: Any) -> None:
        pools.add(spark.sparkContext.getLocalProperty("spark.scheduler.pool"))
        all_started.wait()
        merge_target(spark, *args, **kwargs)

    # The three reach their tombstones together (the barrier): without one commit at a time,
    # their appends would overlap.
    inside, most = [0], [0]
    counting = threading.Lock()

    def one_at_a_time(*args: Any, **kwargs: Any) -> None:
        with counting:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            append_tombstones(*args, **kwargs)
        finally:
            with counting:
                inside[0] -= 1

    monkeypatch.setattr(keyed, "merge_target", meeting)
    monkeypatch.setattr(keyed, "append_tombstones", one_at_a_time)

    summary = lake.run("shop")

    assert pools == {f"cdc-ingest-writer-{n}" for n in range(3)}
    assert most == [1]
    assert outcomes(summary) == {name: (2, 0, 1, 1, 0, 0, 0, 0) for name in NAMES}
    tombstones = lake.table("_cdc_tombstones").collect()
    assert sorted((r["target_table"], r["batch_id"]) for r in tombstones) == [
        ("items", 2),
        ("orders", 2),
        ("stock", 2),
    ]
    for name in NAMES:
        assert lake.rows(name) == [{"id": 1, "v": f"{name}1-new"}, {"id": 3, "v": f"{name}3"}]
        commit = lake.spark.sql(
            f"SELECT summary FROM {lake.catalog}.ods.{name}.snapshots ORDER BY committed_at DESC"
        ).first()
        counts = json.loads(commit["summary"]["cdc.counts"])
        assert (counts["table"], counts["counts"]["updated"], counts["counts"]["deleted"]) == (
            name,
            1,
            1,
        )


def test_a_table_applied_alone_that_is_refused_is_dead_lettered_while_the_others_apply(
    lake, monkeypatch
):
    from cdc_ingest.apply import keyed
    from cdc_ingest.apply.keyed_writes import merge_target
    from pyspark.errors import AnalysisException

    _three_tables_applied_alone(lake, monkeypatch)

    def refusing_items(spark: Any, classified: Any, target: Any, *args: Any, **kwargs: Any) -> None:
        if target.name == "items":
            raise AnalysisException("items: refused for the test")
        merge_target(spark, classified, target, *args, **kwargs)

    monkeypatch.setattr(keyed, "merge_target", refusing_items)

    summary = lake.run("shop")

    assert summary.tables["items"].dead_lettered == 2
    assert outcomes(summary)["orders"] == outcomes(summary)["stock"] == (2, 0, 1, 1, 0, 0, 0, 0)
    assert lake.rows("items") == [
        {"id": 1, "v": "items1"},
        {"id": 2, "v": "items2"},
        {"id": 3, "v": "items3"},
    ]
    assert lake.rows("orders") == [{"id": 1, "v": "orders1-new"}, {"id": 3, "v": "orders3"}]
    (reason,) = {d["reason"] for d in lake.dead_letters()}
    assert (
        reason.startswith("table items could not be applied") and "refused for the test" in reason
    )
