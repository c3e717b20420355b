"""The fresh-table bench's references: the parse-only baseline parses each line once and counts
every op; the hand-written job keeps each key's newest change."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripts.benchmarks.bench import baseline, baseline_query, hand_fresh, write_config

LINES = [
    '{"schema":{},"payload":{"op":"c","ts_ms":"5","after":{"id":"1"},"source":{"table":"t"}}}',
    '{"schema":{},"payload":{"op":"u","ts_ms":"6","before":{"id":"1"},"after":{"id":"1"}}}',
    '{"schema":{},"payload":{"op":"c","ts_ms":"7","after":{"id":"2","v":"x"}}}',
    '{"schema":{},"payload":{"ts_ms":"8"}}',
]


def test_the_baseline_parses_each_line_once(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "part-0.jsonl").write_text("\n".join(LINES) + "\n")
    query = baseline_query(spark, tmp_path)
    # A filter on the parsed op would be pushed below the parse and parse every line again.
    plan = query._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("from_json(") == 1, plan
    rows = {r["op"]: (r["n"], r["before_cells"], r["after_cells"]) for r in query.collect()}
    # size() of a missing image is -1 (Spark's spark.sql.legacy.sizeOfNull, on by default).
    assert rows == {"c": (2, -2, 3), "u": (1, 1, 1), None: (1, -1, -1)}
    _, counted = baseline(spark, tmp_path)
    assert counted == 3


def _change(op: str, ts: int, before: str, after: str) -> str:
    """A line in the shape ``bench_data`` generates (Lindorm's Debezium envelope)."""
    return (
        f'{{"schema":{{}},"payload":{{"op":"{op}","ts_ms":{ts + 1},"before":{before},'
        f'"after":{after},"source":{{"db":"ld-bench","table":"customers","ts_ms":{ts}}}}}}}'
    )


def _row(key: int, name: str, amount: float) -> str:
    return (
        f'{{"id":"{key}","name":"{name}","email":"{name.lower()}@mail.com",'
        f'"amount":{amount},"city":"Oslo"}}'
    )


def test_the_hand_written_job_keeps_each_keys_newest_change(spark: Any, tmp_path: Path) -> None:
    from cdc_ingest.config import load_config
    from cdc_ingest.spark_session import configure_catalog

    landing = tmp_path / "landing"
    landing.mkdir()
    lines = [
        _change("c", 10, "null", _row(1, "Ann", 1.5)),
        _change("c", 11, "null", _row(2, "Bo", 2.0)),
        _change("u", 20, _row(1, "Ann", 1.5), _row(1, "Ada", 2.5)),
        _change("d", 30, _row(2, "Bo", 2.0), "null"),
        _change("c", 5, "null", _row(3, "Cy", 3.0)),
        # Landed after the insert, but older by its source time: the insert stays.
        _change("u", 4, _row(3, "Cy", 3.0), _row(3, "Old", 0.5)),
    ]
    (landing / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    config = load_config(write_config(tmp_path / "hand", landing, "bench_hand_test"))
    configure_catalog(spark, config.catalog)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench_hand_test.bench")
    hand_fresh(spark, landing, "bench_hand_test.bench.customers")
    rows = spark.table("bench_hand_test.bench.customers").orderBy("id").collect()
    assert [tuple(r) for r in rows] == [
        (1, "Ada", "ada@mail.com", 2.5, "Oslo"),
        (3, "Cy", "cy@mail.com", 3.0, "Oslo"),
    ]
