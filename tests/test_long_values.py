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
