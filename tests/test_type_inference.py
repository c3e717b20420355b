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


def test_many_tables_sharing_column_names_each_get_their_own_types(lake):
    """Twelve tables: the inference wraps their images in groups of tables (three here), and
    tables of one group that share a column's name keep their own types."""
    values = {"bigint": 7, "string": "seven", "double": 7.5, "boolean": True}
    kinds = {f"t{n}": list(values)[n % 4] for n in range(12)}
    lake.add_pipeline("shop", "debezium-json", keys={t: ["id"] for t in kinds})
    lake.land(
        "shop",
        "part-0.json",
        [insert(t, {"id": 1, "v": values[kind], f"only_{t}": 1}) for t, kind in kinds.items()],
    )
    summary = lake.run("shop")

    assert summary.dead_lettered == 0
    for table, kind in kinds.items():
        assert source_types(lake, table) == {"id": "bigint", "v": kind, f"only_{table}": "bigint"}


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
    extracting = [f for f in filters if "get_json_object" in f or "from_json" in f]
    assert filters and not extracting


def _nested(path: str, image: object) -> dict:
    """A message holding ``image`` at the JSONPath ``path`` ($, $.a.b or $.a[0])."""
    value: object = image
    if path == "$":
        assert isinstance(image, dict)
        return image
    names = path[2:].split(".")
    if names[-1].endswith("[0]"):
        names[-1] = names[-1][:-3]
        value = [image, {"later": "element"}]
    for name in reversed(names):
        value = {name: value}
    assert isinstance(value, dict)
    return value


def test_every_format_s_images_are_read_as_get_json_object_reads_them(spark):
    """The sample's images are read from one parse of each message (``_with_image``): the same
    texts ``get_json_object`` cuts out for each format's paths (in their order of preference)."""
    from cdc_ingest.formats import FORMATS, load_decoder
    from cdc_ingest.schema.inference import _with_image

    image = {"id": 1, "v": 2.5, "big": 12345678901234, "n": {"x": [1, "a", None]}, "s": 'q"u\\é'}
    for name in FORMATS:
        decoder = load_decoder(name)
        paths = decoder.image_json_paths
        messages = [json.dumps({"other": 1, **_nested(p, {**image, "at": p})}) for p in paths]
        # The first path wins where several hold an image; a message with none gives null.
        both: dict[str, object] = {}
        for p in reversed(paths):
            both |= _nested(p, {"id": 2, "at": p})
        messages += [json.dumps(both), json.dumps({"unrelated": {"id": 3}}), "NaN-free: not json"]
        frame = spark.createDataFrame([(m,) for m in messages], "value string")
        got = [r["image"] for r in _with_image(frame, "value", decoder, []).collect()]
        cut = ", ".join(f"get_json_object(value, '{p}')" for p in paths)
        expected = [r[0] for r in frame.selectExpr(f"coalesce({cut})").collect()]
        assert got == expected, name
        assert got[0] is not None and json.loads(got[0])["at"] == paths[0], name


def test_an_image_is_its_json_text(spark):
    """Written by hand: what Debezium and Canal messages' images read as."""
    from cdc_ingest.formats import load_decoder
    from cdc_ingest.schema.inference import _with_image

    messages = [
        '{"op":"c","after":{"id":1,"v":2.50,"n":{"x":[1,"a"]},"s":"q\\"u"},"source":{"table":"t"}}',
        '{"op":"d","before":{"id":2},"after":null}',
        '{"schema":{"type":"struct"},"payload":{"op":"u","after":{"id":3},"before":{"id":0}}}',
    ]
    frame = spark.createDataFrame([(m,) for m in messages], "value string")
    debezium = load_decoder("debezium-json")
    got = [r["image"] for r in _with_image(frame, "value", debezium, []).collect()]
    # Jackson writes a number with a fraction as a double (2.5), for both readers.
    assert got == ['{"id":1,"v":2.5,"n":{"x":[1,"a"]},"s":"q\\"u"}', '{"id":2}', '{"id":3}']
    canal = spark.createDataFrame(
        [('{"data":[{"id":4},{"id":5}],"type":"INSERT"}',)], "value string"
    )
    [row] = _with_image(canal, "value", load_decoder("canal-json"), []).collect()
    assert row["image"] == '{"id":4}'
