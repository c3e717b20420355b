"""OpenLineage through real Airflow: ``airflow dags test`` of an ingest DAG whose pipelines file
turns lineage on, with OpenLineage's file transport on both sides.

The Airflow OpenLineage provider reports the ``apply_batch`` task with its datasets (the landing
zone in, the changed table out); the OpenLineage Spark integration in the submitted job reports
the job's Spark runs with that task as their parent run.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from airflow_runner import airflow, airflow_env, migrate, require_stack, tail
from test_airflow_dags_test import LINDORM_LINES


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.slow
def test_the_ingest_task_is_the_parent_of_the_spark_jobs_lineage(tmp_path: Path) -> None:
    require_stack()
    landing = tmp_path / "landing"
    landing.mkdir()
    spark_events, airflow_events = tmp_path / "spark.jsonl", tmp_path / "airflow.jsonl"
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            catalog: {{name: lake, uri: "sqlite:///{tmp_path}/catalog.db",
                       warehouse: "file://{tmp_path}/warehouse"}}
            lineage:
              namespace: cdc_test
              transport: {{type: file, location: "{spark_events}"}}
            pipelines:
              - name: customers
                format: lindorm
                landing: file://{landing}
                namespace: ods
                retries: 0
                keys: {{customers: [id]}}
            """
        ),
        encoding="utf-8",
    )
    transport = {"type": "file", "log_file_path": str(airflow_events), "append": True}
    env = airflow_env(
        tmp_path / "airflow",
        config,
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(transport),
        AIRFLOW__OPENLINEAGE__NAMESPACE="airflow_test",
    )
    migrate(env, tmp_path)
    (landing / "customers-0001.json").write_text(LINDORM_LINES, encoding="utf-8")
    run = airflow(["dags", "test", "ingest_customers"], env, tmp_path)
    assert run.returncode == 0, tail(run)

    task = [
        e
        for e in events(airflow_events)
        if e["job"]["name"] == "ingest_customers.apply_batch" and e["eventType"] == "COMPLETE"
    ]
    assert len(task) == 1, [e["job"]["name"] for e in events(airflow_events)]
    [complete] = task
    assert [(d["namespace"], d["name"]) for d in complete["inputs"]] == [("file", str(landing))]
    assert [(d["namespace"], d["name"]) for d in complete["outputs"]] == [
        ("iceberg://lake", "ods.customers")
    ]

    spark = events(spark_events)
    assert spark, "the Spark job reported nothing"
    assert {e["job"]["namespace"] for e in spark} == {"cdc_test"}

    def parent(event: dict[str, Any], level: str = "") -> tuple[str, str, str]:
        facet = event["run"]["facets"]["parent"]
        facet = facet[level] if level else facet
        return (facet["job"]["namespace"], facet["job"]["name"], facet["run"]["runId"])

    task_run = ("airflow_test", "ingest_customers.apply_batch", complete["run"]["runId"])
    # The Spark application's run is the task's child; each Spark job's run is the application's
    # child, with the task's root (the DAG run) as its root.
    application = [e for e in spark if e["job"]["name"] == "cdc_ingest_customers"]
    assert application and {parent(e) for e in application} == {task_run}
    jobs = [e for e in spark if e not in application]
    [application_run] = {e["run"]["runId"] for e in application}
    assert {parent(e) for e in jobs} == {("cdc_test", "cdc_ingest_customers", application_run)}
    dag_run = ("airflow_test", "ingest_customers", parent(complete)[2])
    assert parent(complete)[:2] == dag_run[:2]
    assert {parent(e, "root") for e in jobs} == {dag_run}
    # The Spark run that wrote the mirror.
    assert any(e["job"]["name"].endswith("append_data.lake_ods_customers") for e in spark), sorted(
        {e["job"]["name"] for e in spark}
    )


def test_lineage_is_off_unless_the_pipelines_file_turns_it_on(tmp_path: Path) -> None:
    from cdc_ingest.config import ConfigError, load_config
    from cdc_ingest_airflow.spark_job import jars_template, spark_conf

    head = "catalog: {name: lake, uri: 'sqlite:////tmp/x.db', warehouse: 'file:///tmp/w'}\n"
    pipelines = "pipelines:\n  - {name: p, format: lindorm, namespace: ods, landing: 'file:///l'}\n"
    path = tmp_path / "pipelines.yaml"
    path.write_text(head + pipelines, encoding="utf-8")
    off = load_config(path)
    assert off.lineage is None
    assert "spark.extraListeners" not in spark_conf(off)
    assert jars_template(off) == "{{ cdc_ingest_jars() }}"

    path.write_text(head + "lineage: true\n" + pipelines, encoding="utf-8")
    on = load_config(path)
    conf = spark_conf(on)
    assert conf["spark.extraListeners"] == "io.openlineage.spark.agent.OpenLineageSparkListener"
    assert conf["spark.openlineage.namespace"] == "cdc_ingest"
    assert not any(k.startswith("spark.openlineage.transport") for k in conf)
    assert jars_template(on) == "{{ cdc_ingest_jars(True) }}"
    assert "spark.extraListeners" not in spark_conf(on, lineage=False)

    for section, message in {
        "lineage: {transport: {location: /x}}": "must be a mapping with a type",
        "lineage: {namespace: 'a b'}": "must be a plain name",
        "lineage: {sink: x}": r"lineage: unknown key 'sink' \(keys: namespace, transport\)",
    }.items():
        path.write_text(head + section + "\n" + pipelines, encoding="utf-8")
        with pytest.raises(ConfigError, match=message):
            load_config(path)
