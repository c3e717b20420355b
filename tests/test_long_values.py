"""A valid line holding a string longer than Jackson's default limit (20,000,000 characters) is
applied (issue 51, defect 10: it was dead-lettered as "line is not valid JSON")."""

from __future__ import annotations

import json

import pytest

LENGTH = 20_000_001


@pytest.mark.parametrize("envelope", ["none", "kafka"])
def test_a_string_over_twenty_million_characters(lake, envelope):
    value = {
        "before": None,
        "after": {"id": 1, "doc": "x" * LENGTH},
        "source": {"db": "shop", "table": "docs", "ts_ms": 1},
        "op": "c",
        "ts_ms": 1,
    }
    line = (
        value
        if envelope == "none"
        else {"topic": "t", "partition": 0, "offset": 0, "key": None, "value": value}
    )
    lake.add_pipeline("big", "debezium-json", keys={"docs": ["id"]}, envelope=envelope)
    lake.land("big", "000.json", [json.dumps(line)])

    lake.run("big")

    assert lake.dead_letters() == []
    [row] = lake.table("docs").selectExpr("id", "length(doc) AS n").collect()
    assert (row["id"], row["n"]) == (1, LENGTH)


@pytest.mark.slow
def test_a_batch_too_large_for_the_driver_fails_in_one_line_and_finishes_with_more(lake):
    """Issue 65, 4: two 50 MB lines ended the driver's JVM, and the error line said only
    ``ConnectionRefusedError``. Here two 20 MB lines and a 1g driver: the line names memory, the
    batch and its files, and the documented rerun with a larger driver finishes the batch."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    lake.add_pipeline("big", "debezium-json", keys={"docs": ["id"]})
    for n in range(2):
        after = {"id": n, "doc": "x" * 20_000_000}
        message = {
            "before": None,
            "after": after,
            "source": {"db": "shop", "table": "docs"},
            "op": "c",
            "ts_ms": 1,
        }
        lake.land("big", f"{n:03}.json", [json.dumps(message)])
    cli = str(Path(sys.executable).parent / "cdc-ingest")
    run = [cli, "run", "--config", str(lake.config_path), "--pipeline", "big", "--cold"]

    small = subprocess.run(
        run, capture_output=True, text=True, env={**os.environ, "SPARK_DRIVER_MEMORY": "1g"}
    )

    assert small.returncode == 2
    [line] = [ln for ln in small.stderr.splitlines() if ln.startswith("cdc-ingest: error:")]
    assert line.startswith("cdc-ingest: error: pipeline big: the Spark driver ran out of memory")
    assert "batch 1, files 000.json, 001.json" in line
    assert "rerun with a larger spark.driver.memory" in line

    larger = subprocess.run(
        run, capture_output=True, text=True, env={**os.environ, "SPARK_DRIVER_MEMORY": "4g"}
    )

    assert larger.returncode == 0, larger.stderr[-2000:]
    assert "batch 1 (resumed)" in larger.stdout
    assert [r["id"] for r in lake.rows("docs", "id")] == [0, 1]
