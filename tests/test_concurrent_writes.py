"""Tables written at once (``apply/concurrent_writes.py``): the tables of a group too large for a
pyiceberg rewrite are merged by Spark several at a time, and so are the tables applied each by a
plan of its own (``apply/alone_tables.py``: too many changes for a group, moved keys, unsent
values), each still a commit of its own with its own counts, its refusal its own, tombstones
committed one at a time into the namespace's one tombstones table; the runtime filter's session
settings held by overlapping MERGEs together."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from canal_messages import outcomes, row_message

NAMES = ("orders", "items", "stock")
# How three tables of three rows are applied: merged in a group (none small enough to be
# rewritten), or each alone (none fitting a group).
MERGED_IN_A_GROUP = "rewritten_rows"
APPLIED_ALONE = "group_rows"


def _three_tables(lake: Any, path: str) -> None:
    """Three tables holding rows, each with an update and a delete in the second batch, applied
    by ``path`` (the write policy's size set to 0)."""
    lake.route_at(**{path: 0})
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


def _each_applied_by_its_own_commit(lake: Any, summary: Any) -> None:
    assert outcomes(summary) == {name: (2, 0, 1, 1, 0, 0, 0, 0) for name in NAMES}
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


def _merges_meeting(monkeypatch: Any, module: Any) -> set[str]:
    """Make each MERGE ``module`` runs wait for the other two to start (written one after
    another, the first would wait out the barrier's timeout and the batch fail); returns the
    scheduler pools they ran in, filled as they start."""
    import threading

    from cdc_ingest.apply.keyed_writes import merge_target

    all_started = threading.Barrier(3, timeout=120)
    pools: set[str] = set()

    def meeting(spark: Any, *args: Any, **kwargs: Any) -> None:
        pools.add(spark.sparkContext.getLocalProperty("spark.scheduler.pool"))
        all_started.wait()
        merge_target(spark, *args, **kwargs)

    monkeypatch.setattr(module, "merge_target", meeting)
    return pools


def test_tables_merged_by_spark_are_written_at_once_each_with_its_own_counts(lake, monkeypatch):
    from cdc_ingest.apply import existing_tables, groups
    from cdc_ingest.arrow_frames import collect_arrow

    _three_tables(lake, MERGED_IN_A_GROUP)
    pools = _merges_meeting(monkeypatch, existing_tables)
    # Too large to be rewritten, so their rows are not collected to the driver for it (the
    # classification of more than chunk_rows changes is not collected whole).
    lake.route_at(chunk_rows=2)
    collected: list[int] = []

    def counted(frame: Any) -> Any:
        collected.append(1)
        return collect_arrow(frame)

    monkeypatch.setattr(groups, "collect_arrow", counted)

    summary = lake.run("shop")

    assert collected == []
    # Each writer in a scheduler pool of its own (which Spark's FAIR scheduler shares the cores
    # between).
    assert pools == {f"cdc-ingest-writer-{n}" for n in range(3)}
    _each_applied_by_its_own_commit(lake, summary)
    for name in NAMES:
        # Its own MERGE (a position-delete file).
        assert lake.snapshot_files(name)[-1] == ("overwrite", "2", "2", "1")


def test_tables_applied_alone_are_applied_at_once_tombstones_one_commit_at_a_time(
    lake, monkeypatch
):
    import threading

    from cdc_ingest.apply import keyed
    from cdc_ingest.apply.keyed_writes import append_tombstones

    _three_tables(lake, APPLIED_ALONE)
    pools = _merges_meeting(monkeypatch, keyed)
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

    monkeypatch.setattr(keyed, "append_tombstones", one_at_a_time)

    summary = lake.run("shop")

    assert pools == {f"cdc-ingest-writer-{n}" for n in range(3)}
    assert most == [1]
    _each_applied_by_its_own_commit(lake, summary)
    tombstones = lake.table("_cdc_tombstones").collect()
    assert sorted((r["target_table"], r["batch_id"]) for r in tombstones) == [
        ("items", 2),
        ("orders", 2),
        ("stock", 2),
    ]


@pytest.mark.parametrize(
    ("path", "merging"),
    [(MERGED_IN_A_GROUP, "existing_tables"), (APPLIED_ALONE, "keyed")],
    ids=["merged in a group", "applied alone"],
)
def test_a_table_whose_merge_is_refused_is_dead_lettered_while_the_others_are_written_at_once(
    lake, monkeypatch, path, merging
):
    from cdc_ingest.apply.keyed_writes import merge_target
    from pyspark.errors import AnalysisException

    _three_tables(lake, path)

    def refusing_items(spark: Any, classified: Any, target: Any, *args: Any, **kwargs: Any) -> None:
        if target.name == "items":
            raise AnalysisException("items: refused for the test")
        merge_target(spark, classified, target, *args, **kwargs)

    module = importlib.import_module(f"cdc_ingest.apply.{merging}")
    monkeypatch.setattr(module, "merge_target", refusing_items)

    summary = lake.run("shop")

    assert summary.tables["items"].dead_lettered == 2
    assert outcomes(summary)["orders"] == outcomes(summary)["stock"] == (2, 0, 1, 1, 0, 0, 0, 0)
    assert lake.rows("items") == [
        {"id": 1, "v": "items1"},
        {"id": 2, "v": "items2"},
        {"id": 3, "v": "items3"},
    ]
    assert lake.rows("orders") == [{"id": 1, "v": "orders1-new"}, {"id": 3, "v": "orders3"}]
    assert lake.rows("stock") == [{"id": 1, "v": "stock1-new"}, {"id": 3, "v": "stock3"}]
    reasons = {d["reason"] for d in lake.dead_letters()}
    assert len(reasons) == 1
    (reason,) = reasons
    assert (
        reason.startswith("table items could not be applied") and "refused for the test" in reason
    )


def test_overlapping_filtered_merges_keep_the_largest_sizing_then_restore_the_session(
    spark: Any,
) -> None:
    """Tables' MERGEs written at once (``concurrent_writes``) hold the session's filter settings
    together: the first sets them, each sizes the filter up to its own changes, the last puts
    the session's back, whichever ends first."""
    from cdc_ingest.apply.runtime_filter import bloom_filtered

    bits, broadcast = (
        "spark.sql.optimizer.runtime.bloomFilter.numBits",
        "spark.sql.autoBroadcastJoinThreshold",
    )
    session_bits, session_broadcast = spark.conf.get(bits), spark.conf.get(broadcast)
    small, large = bloom_filtered(spark, 10), bloom_filtered(spark, 100)
    try:
        small.__enter__()
        assert (spark.conf.get(bits), spark.conf.get(broadcast)) == ("80", "-1")
        large.__enter__()
        assert spark.conf.get(bits) == "800"
        small.__exit__(None, None, None)
        assert (spark.conf.get(bits), spark.conf.get(broadcast)) == ("800", "-1")
        large.__exit__(None, None, None)
        assert (spark.conf.get(bits), spark.conf.get(broadcast)) == (
            session_bits,
            session_broadcast,
        )
    finally:
        spark.conf.set(broadcast, session_broadcast)
