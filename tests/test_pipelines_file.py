"""The pipelines file as one typed model: its JSON Schema, its defaults, and one line per error
naming the file, the pipeline and the key's path."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import jsonschema
import pytest
import yaml
from cdc_ingest.cli import main
from cdc_ingest.config import ConfigError, load_config

REPO = Path(__file__).resolve().parent.parent
CATALOG = "catalog: {uri: 'sqlite:////tmp/x.db', warehouse: 'file:///tmp/w'}\n"
PIPELINE = "{name: p, format: canal-json, landing: 'file:///l', namespace: ods"


def _schema(capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["check", "--schema"]) == 0
    return json.loads(capsys.readouterr().out)


def _file(tmp_path: Path, pipeline: str = "", rest: str = "") -> Path:
    path = tmp_path / "pipelines.yaml"
    path.write_text(CATALOG + rest + f"pipelines:\n  - {PIPELINE}{pipeline}}}\n", encoding="utf-8")
    return path


def test_check_schema_prints_a_json_schema_the_example_file_meets(capsys):
    schema = _schema(capsys)
    jsonschema.Draft202012Validator.check_schema(schema)
    example = yaml.safe_load((REPO / "docker" / "pipelines.example.yaml").read_text())
    jsonschema.validate(example, schema)
    typo = {**example, "pipelines": [{**example["pipelines"][0], "shedule": "@hourly"}]}
    with pytest.raises(jsonschema.ValidationError, match="'shedule' was unexpected"):
        jsonschema.validate(typo, schema)


def test_the_schema_lists_every_key_of_the_file_and_of_a_pipeline(capsys):
    schema = _schema(capsys)
    assert sorted(schema["properties"]) == ["catalog", "lineage", "pipelines", "spark"]
    assert schema["required"] == ["catalog", "pipelines"]
    pipeline = schema["$defs"]["PipelineConfig"]
    assert set(pipeline["properties"]) == {
        "name",
        "format",
        "landing",
        "namespace",
        "envelope",
        "table",
        "routes",
        "include_tables",
        "exclude_tables",
        "column_names",
        "keys",
        "schedule",
        "retries",
        "landed_at",
        "aws_conn_id",
        "maintenance",
        "table_options",
        "deletes",
        "type_mapping",
        "schema_changes",
        "file_format",
        "alerts",
        "columns",
        "metadata_key",
        "no_set_table",
    }
    assert pipeline["required"] == ["name", "format", "landing", "namespace"]
    assert pipeline["properties"]["deletes"]["enum"] == ["apply", "ignore", "soft"]
    assert pipeline["properties"]["retries"]["minimum"] == 0
    options = pipeline["properties"]["table_options"]["additionalProperties"]["properties"]
    assert "partition_by" in options and "expectations" in options
    maintenance = schema["$defs"]["MaintenanceConfig"]["properties"]
    assert maintenance["lock_wait"]["default"] == "1h"


def test_a_pipeline_that_gives_only_what_is_required_gets_the_documented_defaults(tmp_path):
    (pipeline,) = load_config(_file(tmp_path)).pipelines
    assert (pipeline.envelope, pipeline.table, pipeline.file_format) == ("none", "{table}", "json")
    assert (pipeline.retries, pipeline.schedule, pipeline.column_names) == (2, None, "as-sent")
    assert pipeline.maintenance.schedule == "@daily"
    assert pipeline.maintenance.retain_snapshots == timedelta(days=7)
    assert pipeline.maintenance.lock_wait == timedelta(hours=1)
    assert not pipeline.alerts.any
    orders = pipeline.tables.for_table("orders")
    assert (orders.deletes, orders.type_mapping, orders.history) == ("apply", "default", "none")


@pytest.mark.parametrize(
    ("pipeline", "rest", "message"),
    [
        (", shedule: '@hourly'", "", "pipeline 'p': unknown key 'shedule' (keys: name, format, "),
        (", retries: -1", "", "pipeline 'p': retries: must be a non-negative integer"),
        (", envelope: avro", "", "pipeline 'p': envelope: 'avro' must be one of none, kafka"),
        (
            ", table_options: {orders: {expectations: {r: {check: 'q > 0', on_violation: x}}}}",
            "",
            "pipeline 'p': table_options.orders.expectations: r.on_violation: 'x' must be one of "
            "warn, drop, fail",
        ),
        (
            ", table_options: {orders: {partition_by: ['bucket(x)']}}",
            "",
            "pipeline 'p': table_options.orders.partition_by: 'bucket(x)' is not an Iceberg",
        ),
        (", routes: [{source: 'a', table: t, db_column: c, table_column: c}]", "", "routes.0: "),
        (", alerts: {dead_letters: 'yes'}", "", "alerts.dead_letters: expected true or false"),
        ("", "spark: {conf: {spark.sql.ansi.enabled: true}}\n", "spark.conf: sets spark.sql.ansi"),
        ("", "lineage: {sink: x}\n", "lineage: unknown key 'sink' (keys: namespace, transport)"),
    ],
)
def test_an_invalid_file_is_one_line_naming_the_file_and_the_keys_path(
    tmp_path, pipeline, rest, message
):
    path = _file(tmp_path, pipeline, rest)
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(raised.value).startswith(f"{path}: "), raised.value
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_pipeline_without_a_name_is_named_by_its_place(tmp_path):
    path = tmp_path / "pipelines.yaml"
    path.write_text(CATALOG + "pipelines:\n  - {format: canal-json}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r": pipelines\[0\]: missing required key 'name'$"):
        load_config(path)


def test_a_replay_keeps_every_setting_but_the_schema_changes(tmp_path):
    """A replay's pipeline (``ignoring_schema_changes``) is the configured one with every
    table's schema kept: nothing else of it is lost or reset to a default."""
    everything = (
        ", table: 'x_{table}', envelope: kafka, keys: {orders: id}, schedule: '@hourly',"
        " retries: 5, landed_at: {path_pattern: 'dt=%Y-%m-%d'}, column_names: lowercase,"
        " routes: [{source: 'db_[0-9]+[.]orders', table: orders}], include_tables: 'o.*',"
        " maintenance: {lock_wait: 2h}, alerts: {max_lag: 15m}, deletes: soft,"
        " schema_changes: fail, table_options: {orders: {partition_by: ['bucket(4, id)'],"
        " schema_changes: {add_column: ignore}, expectations: {q: 'id > 0'}}}"
    )
    (pipeline,) = load_config(_file(tmp_path, everything)).pipelines
    replay = pipeline.ignoring_schema_changes()
    for key in ("table", "envelope", "keys", "schedule", "retries", "landed_at", "routes"):
        assert getattr(replay, key) == getattr(pipeline, key), key
    assert replay.keys == {"orders": ("id",)}
    assert replay.landed_at.path_pattern == "dt=%Y-%m-%d"
    assert replay.maintenance.lock_wait == timedelta(hours=2)
    assert replay.alerts.max_lag == timedelta(minutes=15)
    orders = replay.tables.for_table("orders")
    assert orders.partition_by == pipeline.tables.for_table("orders").partition_by
    assert (orders.deletes, list(orders.expectations)) == ("soft", ["q"])
    # schema_changes: ignore, as docs/schema-changes.md gives it: every kind but create_table.
    assert orders.schema_changes["add_column"] == orders.schema_changes["drop_column"] == "ignore"
    assert orders.schema_changes["create_table"] == "apply"
    assert pipeline.tables.for_table("orders").schema_changes["add_column"] == "ignore"
    assert pipeline.tables.for_table("orders").schema_changes["drop_column"] == "fail"
