"""Tables of a group written at once (``apply/concurrent_writes.py``): the tables too large for
a pyiceberg rewrite are merged by Spark several at a time, each still a commit of its own with its
own counts, its refusal its own; the runtime filter's session settings held by overlapping
MERGEs together."""

from __future__ import annotations

import json
from typing import Any

from canal_messages import outcomes, row_message


def _three_merged_tables(lake: Any, monkeypatch: Any) -> None:
    """Three tables holding rows, each with an update and a delete in the second batch (merged:
    none is small enough to be rewritten)."""
    from cdc_ingest.apply import existing_tables

    monkeypatch.setattr(existing_tables, "REWRITTEN_ROWS", 0)
    lake.add_pipeline("shop", "canal-json")
    names = ("orders", "items", "stock")
    first = [
        row_message(name, "INSERT", {"id": key, "v": f"{name}{key}"}, 10 + key)
        for name in names
        for key in (1, 2, 3)
    ]
    lake.land("shop", "001.json", first)
    lake.run("shop")
    second = [
        message
        for n, name in enumerate(names)
        for message in (
            row_message(name, "UPDATE", {"id": 1, "v": f"{name}1-new"}, 20 + n),
            row_message(name, "DELETE", {"id": 2, "v": f"{name}2"}, 30 + n),
        )
    ]
    lake.land("shop", "002.json", second)


def test_tables_merged_by_spark_are_written_at_once_each_with_its_own_counts(lake, monkeypatch):
    import threading

    from cdc_ingest.apply import existing_tables, fresh_tables
    from cdc_ingest.apply.keyed_writes import merge_target
    from cdc_ingest.arrow_frames import collect_arrow

    _three_merged_tables(lake, monkeypatch)
    # Each MERGE waits for the other two to start: written one after another, the first would
    # wait out the barrier's timeout and the batch fail.
    all_started = threading.Barrier(3, timeout=120)

    pools: set[str] = set()

    def meeting(spark: Any, *args: Any, **kwargs: Any) -> None:
        pools.add(spark.sparkContext.getLocalProperty("spark.scheduler.pool"))
        all_started.wait()
        merge_target(spark, *args, **kwargs)

    monkeypatch.setattr(existing_tables, "merge_target", meeting)
    # Too large to be rewritten, so their rows are not collected to the driver for it (the
    # classification of more than CHUNK_ROWS changes is not collected whole).
    monkeypatch.setattr(fresh_tables, "CHUNK_ROWS", 2)
    collected: list[int] = []

    def counted(frame: Any) -> Any:
        collected.append(1)
        return collect_arrow(frame)

    monkeypatch.setattr(fresh_tables, "collect_arrow", counted)

    summary = lake.run("shop")

    assert collected == []
    # Each writer in a scheduler pool of its own (which Spark's FAIR scheduler shares the cores
    # between).
    assert pools == {f"cdc-ingest-writer-{n}" for n in range(3)}
    assert outcomes(summary) == {
        name: (2, 0, 1, 1, 0, 0, 0, 0) for name in ("orders", "items", "stock")
    }
    for name in ("orders", "items", "stock"):
        assert lake.rows(name) == [{"id": 1, "v": f"{name}1-new"}, {"id": 3, "v": f"{name}3"}]
        # Its own MERGE (a position-delete file), carrying its own counts, not another table's.
        assert lake.snapshot_files(name)[-1] == ("overwrite", "2", "2", "1")
        commit = lake.spark.sql(
            f"SELECT summary FROM {lake.catalog}.ods.{name}.snapshots ORDER BY committed_at DESC"
        ).first()
        counts = json.loads(commit["summary"]["cdc.counts"])
        assert (counts["table"], counts["counts"]["updated"], counts["counts"]["deleted"]) == (
            name,
            1,
            1,
        )


def test_a_table_whose_merge_is_refused_is_dead_lettered_while_the_others_are_written_at_once(
    lake, monkeypatch
):
    from cdc_ingest.apply import existing_tables
    from pyspark.errors import AnalysisException

    _three_merged_tables(lake, monkeypatch)
    from cdc_ingest.apply.keyed_writes import merge_target

    def refusing_items(spark: Any, classified: Any, target: Any, *args: Any, **kwargs: Any) -> None:
        if target.name == "items":
            raise AnalysisException("items: refused for the test")
        merge_target(spark, classified, target, *args, **kwargs)

    monkeypatch.setattr(existing_tables, "merge_target", refusing_items)

    summary = lake.run("shop")

    assert summary.tables["items"].dead_lettered == 2
    assert outcomes(summary)["orders"] == outcomes(summary)["stock"] == (2, 0, 1, 1, 0, 0, 0, 0)
    assert lake.rows("items") == [
        {"id": 1, "v": "items1"},
        {"id": 2, "v": "items2"},
        {"id": 3, "v": "items3"},
    ]
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
