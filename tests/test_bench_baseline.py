"""The fresh-table bench's parse-only reference: each line parsed once, every op counted."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scripts.benchmarks.bench import baseline, baseline_query

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
