"""Columns nothing declares are typed from each table's own row images, as Spark's JSON reader does.

The types below are written by hand from Spark's JSON inference rules (integers -> bigint, numbers
with a fraction -> double, true/false -> boolean, text or mixed -> string) and the product's
column types for them.
"""

from __future__ import annotations

import json
from itertools import count

from cdc_ingest.schema.inference import INFERENCE_SAMPLE

_ts = count(1_700_000_000_000)


def insert(table: str, after: dict) -> str:
    source = {"db": "shop", "table": table, "ts_ms": next(_ts)}
    return json.dumps({"op": "c", "ts_ms": source["ts_ms"], "after": after, "source": source})


def source_types(lake, table: str) -> dict[str, str]:
    return {
        f.name: f.dataType.simpleString()
        for f in lake.table(table).schema.fields
        if not f.name.startswith("_cdc_")
    }


def test_each_table_of_a_batch_is_typed_from_its_own_images(lake):
    """Three tables share column names with different values in one batch: each gets its own."""
    lake.add_pipeline("shop", "debezium-json", keys={t: ["id"] for t in ("a", "b", "c")})
    lake.land(
        "shop",
        "part-0.json",
        [
            insert("a", {"id": 1, "v": 10, "flag": True}),
            insert("b", {"id": 1, "v": "ten", "flag": "yes"}),
            insert("c", {"id": 1, "v": 10.5, "flag": None}),
            insert("a", {"id": 2, "v": 20, "flag": False}),
            insert("c", {"id": 2, "v": 3, "flag": None}),
        ],
    )
    summary = lake.run("shop")

    assert summary.dead_lettered == 0
    assert source_types(lake, "a") == {"id": "bigint", "v": "bigint", "flag": "boolean"}
    assert source_types(lake, "b") == {"id": "bigint", "v": "string", "flag": "string"}
    # A column that is null in every image is typed string (Spark infers no type from nulls).
    assert source_types(lake, "c") == {"id": "bigint", "v": "double", "flag": "string"}
    assert lake.rows("c") == [{"id": 1, "v": 10.5, "flag": None}, {"id": 2, "v": 3.0, "flag": None}]


def test_a_column_first_seen_past_the_sampled_lines_is_typed_from_the_lines_that_carry_it(lake):
    lake.add_pipeline("shop", "debezium-json", keys={"wide": ["id"], "other": ["id"]})
    lines = [insert("wide", {"id": k, "v": "x"}) for k in range(INFERENCE_SAMPLE)]
    lines += [insert("wide", {"id": INFERENCE_SAMPLE, "v": "y", "late": 7})]
    lines += [insert("other", {"id": 1, "late": "text"})]
    lake.land("shop", "part-0.json", lines)
    summary = lake.run("shop")

    assert summary.tables["wide"].inserted == INFERENCE_SAMPLE + 1
    assert source_types(lake, "wide") == {"id": "bigint", "v": "string", "late": "bigint"}
    assert source_types(lake, "other") == {"id": "bigint", "late": "string"}
    assert lake.rows("wide", "late").count({"late": 7}) == 1


def test_each_sampled_image_is_extracted_once(lake, monkeypatch):
    """The sample's plan filters on no extracted image: a filter dropping images that are not
    objects was pushed below the projection that extracts them, so each was extracted twice."""
    from cdc_ingest.schema import inference

    plans: list[str] = []
    infer = inference._json_schema

    def recording(spark, lines):
        plans.append(lines._jdf.queryExecution().optimizedPlan().toString())
        return infer(spark, lines)

    monkeypatch.setattr(inference, "_json_schema", recording)
    lake.add_pipeline("shop", "debezium-json", keys={"a": ["id"]})
    deleted = {"op": "d", "ts_ms": next(_ts), "before": {"id": 1, "v": 1}, "after": None}
    lake.land(
        "shop",
        "part-0.json",
        [insert("a", {"id": 1, "v": 1}), json.dumps({**deleted, "source": {"table": "a"}})],
    )
    lake.land("shop", "part-1.json", [insert("a", {"id": 2, "v": 2.5})])
    summary = lake.run("shop")

    assert summary.dead_lettered == 0
    assert source_types(lake, "a") == {"id": "bigint", "v": "double"}
    assert len(plans) == 1
    filters = [line for line in plans[0].splitlines() if line.lstrip(" +-:").startswith("Filter")]
    assert filters and not [f for f in filters if "get_json_object" in f]
