"""Inputs a hostile or careless source sends (issue 65): names of the job's own tables and columns,
dates past year 9999, Debezium heartbeats. Expected values are written by hand from the docs
(semantics.md, "Names the job keeps for itself"; formats.md, Debezium heartbeats)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from canal_messages import canal_message, ddl_message
from debezium_messages import INT64, STRING, change, line

# The job's tables, as docs/catalog-tables.md lists them.
JOB_TABLES = (
    "_cdc_checkpoints",
    "_cdc_dead_letters",
    "_cdc_tombstones",
    "_cdc_batches",
    "_cdc_ddl_history",
)


def _columns(lake: Any, table: str) -> list[str]:
    return lake.table(table).columns


def test_a_source_table_named_like_a_job_table_is_dead_lettered(lake):
    """Issue 65, 1: a change aimed at ``_cdc_checkpoints`` once added its columns to the job's
    table, and every later run failed with exit 2."""
    lake.add_pipeline("shop", "canal-json")
    lines = [canal_message("ok", "INSERT", {"id": "1", "v": "x"}, 1000)]
    lines += [
        canal_message(name, "INSERT", {"id": str(7 + n), "v": "y"}, 1001 + n)
        for n, name in enumerate(JOB_TABLES)
    ]
    lines.append(
        ddl_message("_cdc_batches", "ALTER TABLE _cdc_batches ADD COLUMN evil INT", "ALTER", 1010)
    )
    lake.land("shop", "000.json", lines)

    summary = lake.run("shop")

    assert lake.rows("ok") == [{"id": 1, "v": "x"}]
    letters = lake.dead_letters()
    assert sorted(d["target_table"] for d in letters) == sorted(JOB_TABLES)
    for letter in letters:
        assert "names beginning with _cdc_ are the job's own" in letter["reason"], letter
    for name in JOB_TABLES:
        assert not {"id", "v", "evil"} & set(_columns(lake, name)), name
    assert summary.dead_lettered == len(JOB_TABLES)
    assert any("_cdc_batches" in o and "-> failed" in o for o in summary.ddl_outcomes)

    # Every later batch runs as before.
    lake.land("shop", "001.json", [canal_message("ok", "INSERT", {"id": "2", "v": "z"}, 2000)])
    lake.run("shop")
    assert lake.rows("ok") == [{"id": 1, "v": "x"}, {"id": 2, "v": "z"}]


def _plain_insert(row: dict[str, object], table: str = "customers") -> str:
    return json.dumps(
        {
            "before": None,
            "after": row,
            "source": {"db": "shop", "table": table, "ts_ms": 1},
            "op": "c",
            "ts_ms": 1,
        }
    )


def test_only_the_changes_carrying_a_job_column_name_are_dead_lettered(lake):
    """Issue 65, 2: a column ``_cdc_op`` once dead-lettered every change of its table with
    Spark's AMBIGUOUS_REFERENCE."""
    lake.add_pipeline("odd", "debezium-json", keys={"customers": ["id"]})
    lines = [_plain_insert({"id": f"p{n}", "name": "v"}) for n in range(3)]
    lines.append(_plain_insert({"id": "k1", "name": "v", "_cdc_op": "x"}))
    lines.append(_plain_insert({"id": "k2", "name": "v", "_CDC_Batch_Id": 5}))
    lines.append(_plain_insert({"id": "k3", "name": "v", "_cdc_order": "z"}))
    lake.land("odd", "000.json", lines)

    lake.run("odd")

    assert [r["id"] for r in lake.rows("customers")] == ["p0", "p1", "p2"]
    letters = lake.dead_letters()
    assert [json.loads(d["raw"])["after"]["id"] for d in letters] == ["k1", "k2", "k3"]
    for letter in letters:
        assert "names beginning with _cdc_ are the job's own" in letter["reason"], letter
        assert "AMBIGUOUS" not in letter["reason"]


MICRO_TIMESTAMP = {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp"}
DATE = {"type": "int32", "optional": True, "name": "io.debezium.time.Date"}
ZONED = {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp"}
EVENTS = {"id": INT64, "at": MICRO_TIMESTAMP, "day": DATE, "zoned": ZONED}


def _event(n: int, **values: Any) -> str:
    after = {"id": n, "at": None, "day": None, "zoned": None, **values}
    return line(change("events", EVENTS, "c", after, position=1000 + n))


@pytest.mark.parametrize("alone", [False, True], ids=["in a group", "alone"])
def test_a_date_past_year_9999_is_a_dead_letter_on_every_write_route(lake, alone):
    """Issue 65, 3: pyiceberg's file statistics ended the run with OverflowError; Spark stored
    the value. Python's and most readers' dates end at 9999-12-31: every route dead-letters it."""

    if alone:
        lake.route_at(group_rows=2)
    last = "9999-12-31T23:59:59.999999Z"
    lines = [
        _event(1, at=253402300799999999, day=2932896, zoned=last),  # the last instant that fits
        _event(2, at=253402300800000000),  # 10000-01-01T00:00:00
        _event(3, day=2932897),  # 10000-01-01
        _event(4, zoned="+10000-01-01T00:00:00Z"),
        _event(5, at=-62135596800000001),  # one microsecond before 0001-01-01
        line(change("others", {"id": INT64, "name": STRING}, "c", {"id": 1, "name": "a"})),
    ]
    lake.add_pipeline("ev", "debezium-json", keys={"events": ["id"], "others": ["id"]})
    lake.land("ev", "000.json", lines)

    lake.run("ev")

    assert lake.rows("others") == [{"id": 1, "name": "a"}]
    [kept] = lake.rows("events")
    assert kept["id"] == 1
    assert str(kept["at"]) == "9999-12-31 23:59:59.999999"
    assert str(kept["day"]) == "9999-12-31"
    letters = lake.dead_letters()
    assert [json.loads(d["raw"])["payload"]["after"]["id"] for d in letters] == [2, 3, 4, 5]
    for letter, column in zip(letters, ["at", "day", "zoned", "at"], strict=True):
        assert letter["reason"].startswith(f"column '{column}'"), letter["reason"]
        assert "outside the years 1 to 9999" in letter["reason"], letter["reason"]


HEARTBEAT_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "int64", "optional": False, "field": "ts_ms"}],
    "optional": False,
    "name": "io.debezium.connector.common.Heartbeat",
}


def test_debezium_heartbeats_are_counted_as_heartbeats(lake):
    """Issue 65, 6: a heartbeat record was the dead letter "message has no op"."""
    lake.add_pipeline("hb", "debezium-json", keys={"customers": ["id"]})
    lines = [
        _plain_insert({"id": "a", "name": "v"}),
        json.dumps({"schema": HEARTBEAT_SCHEMA, "payload": {"ts_ms": 1795840969000}}),
        json.dumps({"ts_ms": 1795840970000}),
    ]
    lake.land("hb", "000.json", lines)

    summary = lake.run("hb")

    assert summary.dead_lettered == 0
    assert summary.heartbeats == 2
    assert summary.freshness_ms == 1795840970000
    assert "2 heartbeats" in summary.render()
    assert [r["id"] for r in lake.rows("customers")] == ["a"]


def _debezium_update(table: str, row: dict[str, Any], ts_ms: int) -> str:
    source = {"db": "shop", "table": table, "ts_ms": ts_ms, "file": "binlog.000001", "pos": 4}
    message = {"before": row, "after": row, "source": source, "op": "u", "ts_ms": ts_ms}
    return json.dumps(message)


def test_a_table_of_one_format_refuses_the_changes_of_another(lake):
    """Issue 65, 5: a source moved from Canal to Debezium. Their orders never compare, so a
    Debezium update one second newer was skipped as older, for good. The second pipeline's
    changes to that table are refused, naming the first; its other tables flow."""
    lake.add_pipeline("old", "canal-json")
    lake.add_pipeline("new", "debezium-json", keys={"t": ["id"], "t2": ["id"]})
    lake.land("old", "000.json", [canal_message("t", "INSERT", {"id": "1", "v": "x"}, 1000)])
    lake.run("old")
    lake.land(
        "new",
        "000.json",
        [
            _debezium_update("t", {"id": 1, "v": "y"}, 2000),
            _debezium_update("t2", {"id": 1, "v": "y"}, 2000),
        ],
    )

    summary = lake.run("new")

    assert lake.rows("t") == [{"id": 1, "v": "x"}]
    assert lake.rows("t2") == [{"id": 1, "v": "y"}]
    [letter] = lake.dead_letters()
    assert letter["target_table"] == "t"
    assert "pipeline old" in letter["reason"] and "canal-json" in letter["reason"]
    assert "debezium-json" in letter["reason"]
    assert summary.tables["t"].dead_lettered == 1


def _spec(lake: Any, name: str) -> list[str]:
    from cdc_ingest.config import load_config
    from cdc_ingest.state.lake import open_catalog

    table = open_catalog(load_config(lake.config_path).catalog).load_table(f"ods.{name}")
    schema = table.schema()
    return [f"{f.transform}({schema.find_column_name(f.source_id)})" for f in table.spec().fields]


def test_the_pipeline_that_created_a_table_keeps_its_design(lake):
    """Issue 65, 7: two pipelines writing one table, one partitioning it and one not, flipped
    its spec on every run. The pipeline that created it decides its design (semantics.md)."""
    lake.add_pipeline("a", "canal-json", table_options={"t": {"partition_by": ["v"]}})
    lake.add_pipeline("b", "canal-json")
    for n, pipeline in enumerate(["a", "b", "a", "b"]):
        row = {"id": str(n), "v": f"v{n}"}
        lake.land(pipeline, f"{n:03}.json", [canal_message("t", "INSERT", row, 1000 + n)])
        summary = lake.run(pipeline)
        assert _spec(lake, "t") == ["identity(v)"], (pipeline, n)
        assert summary.tables["t"].design_changes == [], summary.tables["t"].design_changes
    assert [r["id"] for r in lake.rows("t")] == [0, 1, 2, 3]


def test_two_pipelines_naming_one_table_with_different_options_are_refused(tmp_path, capsys):
    """Issue 65, 7: both once passed validation. `cdc-ingest check` and every run now refuse
    the file in one line naming both pipelines and the table."""
    from cdc_ingest.cli import main
    from cdc_ingest.config import ConfigError, load_config

    path = tmp_path / "pipelines.yaml"
    path.write_text(
        "catalog: {name: lake, uri: 'sqlite:////tmp/x.db', warehouse: 'file:///tmp/x'}\n"
        "pipelines:\n"
        "  - {name: a, format: canal-json, landing: 'file:///tmp/a', namespace: ods,\n"
        "     table_options: {t: {partition_by: [v]}}}\n"
        "  - {name: b, format: canal-json, landing: 'file:///tmp/b', namespace: ods,\n"
        "     table_options: {t: {sort_by: [v]}}}\n"
        "  - {name: c, format: canal-json, landing: 'file:///tmp/c', namespace: other,\n"
        "     table_options: {t: {sort_by: [id]}}}\n"
    )
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert "pipelines a and b" in message and "ods.t" in message, message
    assert "\n" not in message
    assert main(["check", "--config", str(path)]) != 0
    assert "pipelines a and b" in capsys.readouterr().err


def test_a_rename_to_a_job_table_name_is_rejected(lake):
    """A RENAME TABLE to a name the job keeps leaves the mirror where it is."""
    lake.add_pipeline("shop", "canal-json")
    lake.land("shop", "000.json", [canal_message("ok", "INSERT", {"id": "1", "v": "x"}, 1000)])
    lake.run("shop")
    rename = ddl_message("ok", "RENAME TABLE ok TO _cdc_batches", "RENAME", 1001)
    lake.land("shop", "001.json", [rename])

    summary = lake.run("shop")

    assert lake.rows("ok") == [{"id": 1, "v": "x"}]
    assert any("-> rejected: cannot rename ok to _cdc_batches" in o for o in summary.ddl_outcomes)
    assert "id" not in _columns(lake, "_cdc_batches")
