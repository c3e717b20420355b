"""Stage timings: the stages of a batch and their steps, recorded by one mechanism (the summary's
``phase_seconds``, the bench's table)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from cdc_ingest.stages import StageTimings, recording, stage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripts.benchmarks.bench_phases import render_phases


def test_nested_stages_are_recorded_under_their_path() -> None:
    ticks = iter(range(100))
    timings = StageTimings(cpu_clock=lambda: float(next(ticks)))
    with recording(timings), stage("apply"):
        with stage("merge"):
            pass
        with stage("merge"):
            pass
    with stage("outside any recording"):
        pass
    assert list(timings.spent) == ["apply/merge", "apply"]
    # CPU clock reads: apply opens at 0, merge 1..2 and 3..4, apply closes at 5.
    assert timings.spent["apply/merge"][1] == 2.0
    assert timings.spent["apply"][1] == 5.0
    assert list(timings.top_level()) == ["apply"]


def test_a_batch_records_its_stages_and_the_apply_steps(lake: Any) -> None:
    lake.add_pipeline("shop", "debezium-json", keys={"orders": ["id"]})
    source = {"db": "shop", "table": "orders", "ts_ms": 1}
    changes = [
        {"op": "c", "before": None, "after": {"id": 1, "n": 1}, "source": source},
        {"op": "c", "before": None, "after": {"id": 2, "n": 1}, "source": source},
    ]
    lake.land("shop", "001.json", changes)
    first = StageTimings()
    with recording(first):
        summary = lake.run("shop")
    assert [p for p in first.spent if "/" not in p] == [
        "plan",
        "read",
        "decode",
        "resolve",
        "count",
        "apply",
        "record",
        "commit",
    ]
    assert {
        "apply/prepare target",
        "apply/type, collapse, classify",
        "apply/append to created table",
    } <= set(first.spent)
    # The summary keeps the top-level stages that ran before it was recorded.
    assert list(summary.phase_seconds) == list(first.top_level())[:-1]

    update = {"op": "u", "before": {"id": 1, "n": 1}, "after": {"id": 1, "n": 2}, "source": source}
    lake.land("shop", "002.json", [update])
    second = StageTimings()
    with recording(second):
        lake.run("shop")
    assert "apply/rewrite small table" in second.spent
    assert "apply/append to created table" not in second.spent
    for path, (wall, _) in second.spent.items():
        parent = path.rpartition("/")[0]
        assert not parent or wall <= second.spent[parent][0], path
    lines = render_phases(second)
    assert any(line.split()[0:3] == ["rewrite", "small", "table"] for line in lines)
