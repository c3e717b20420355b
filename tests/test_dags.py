"""The Airflow DAGs generated from a pipelines file, as the DAG processor sees them (no Spark)."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from dag_fixtures import APPLICATION, DAG_FILE, REPO, dagbag


@pytest.mark.usefixtures("clean_env")
def test_one_dag_per_pipeline(config_file: Path) -> None:
    from cdc_ingest_airflow.ingest_operator import IngestSparkSubmitOperator

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    bag = dagbag()

    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {
        "ingest_orders_ld",
        "ingest_crm_arcion",
        "maintain_orders_ld",
        "maintain_crm_arcion",
    }

    from airflow.timetables.interval import CronDataIntervalTimetable

    scheduled, unscheduled = bag.dags["ingest_orders_ld"], bag.dags["ingest_crm_arcion"]
    # Cron with data intervals: a backfill run replays the files landed in its interval.
    assert isinstance(scheduled.timetable, CronDataIntervalTimetable)
    assert scheduled.timetable.summary == "*/5 * * * *"
    assert unscheduled.schedule is None
    assert set(scheduled.tags) == {"cdc-ingest", "lindorm"}
    assert set(unscheduled.tags) == {"cdc-ingest", "arcion"}
    for dag, name, retries in ((scheduled, "orders_ld", 4), (unscheduled, "crm_arcion", 2)):
        assert dag.max_active_runs == 1
        assert dag.catchup is False
        assert sorted(dag.task_ids) == ["apply_batch", "batch_summary", "check_landing"]
        assert dag.get_task("check_landing").downstream_task_ids == {"apply_batch"}
        assert dag.get_task("apply_batch").downstream_task_ids == {"batch_summary"}
        task = dag.get_task("apply_batch")
        assert isinstance(task, IngestSparkSubmitOperator)
        assert task.retries == retries
        assert task.retry_delay.total_seconds() > 0
        assert task.application == str(APPLICATION)
        assert Path(task.application).is_absolute() and Path(task.application).is_file()
        # The run's flags follow; what they render to is in test_dag_params.py.
        assert task.application_args is not None
        assert task.application_args[:5] == [
            "run",
            "--config",
            str(config_file.resolve()),
            "--pipeline",
            name,
        ]
        flags = [a.split("=", 1)[0] for a in task.application_args[5:]]
        assert flags == [
            "--tables",
            "--max-files",
            "--dry-run",
            "--run-id",
            "--replay-from",
            "--replay-to",
            "--rebuild-tables",
        ]
        # Backfill runs do not count towards max_active_runs: one batch of a pipeline at a time.
        assert task.max_active_tis_per_dag == 1
        assert task._conn_id == "spark_local"
        assert task.name == f"cdc-ingest-{name}"
        assert task.env_vars is not None and task.conf is not None
        assert task.env_vars["PYSPARK_PYTHON"] == sys.executable
        # The package is imported as installed: nothing of the source tree is put on the path.
        assert str(REPO / "jobs") not in task.env_vars.get("PYTHONPATH", "").split(os.pathsep)
        # The job's driver registers the catalog itself: no catalog setting (or secret) on
        # spark-submit's command line; the operator resolves the catalog's connections.
        assert not any(key.startswith("spark.sql.catalog.") for key in task.conf)
        assert task.catalog is not None and task.catalog.name == "lake"
        assert task.conf["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")
        # Generated code over HotSpot's 8000-byte limit is JIT-compiled in driver and executors,
        # whose G1 marks the old generation only at a fixed occupancy.
        for jvm in ("driver", "executor"):
            options = task.conf[f"spark.{jvm}.extraJavaOptions"].split()
            assert "-XX:-DontCompileHugeMethods" in options
            assert "-XX:InitiatingHeapOccupancyPercent=80" in options
        # The pipelines file's own spark.conf wins over the defaults.
        assert task.conf["spark.sql.shuffle.partitions"] == "2"


@pytest.mark.usefixtures("clean_env")
def test_one_maintenance_dag_per_pipeline(config_file: Path) -> None:
    from airflow.sdk import Asset, AssetOrTimeSchedule, CronTriggerTimetable
    from cdc_ingest_airflow.ingest_operator import IngestSparkSubmitOperator
    from cdc_ingest_airflow.maintenance_dag import DUE_ARG

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    bag = dagbag()

    assert bag.import_errors == {}
    configured, default = bag.dags["maintain_orders_ld"], bag.dags["maintain_crm_arcion"]
    # On its cron only (``triggers: none``); by default on @daily or its maintenance asset.
    assert configured.schedule == "0 3 * * *"
    assert isinstance(default.timetable, AssetOrTimeSchedule)
    cron = default.timetable.timetable
    assert isinstance(cron, CronTriggerTimetable) and cron.expression == "0 0 * * *"
    assert default.timetable.asset_condition == Asset(name="cdc_ingest.maintenance_due.crm_arcion")
    assert "It also runs when an ingest batch leaves a table at 10 commits" in default.doc_md
    assert "delete files per data file" in default.doc_md
    assert "It also runs" not in configured.doc_md
    assert "keeping the last 5 snapshots" in configured.doc_md
    assert "older than 2d" in configured.doc_md
    assert "keeping the snapshots of the last 7d" in default.doc_md
    for dag, name, retries in ((configured, "orders_ld", 4), (default, "crm_arcion", 2)):
        assert dag.max_active_runs == 1
        assert dag.catchup is False
        assert set(dag.tags) == {"cdc-ingest", "maintenance"}
        assert dag.task_ids == ["maintain_tables"]
        task = dag.get_task("maintain_tables")
        assert isinstance(task, IngestSparkSubmitOperator)
        assert task.retries == retries
        assert task.retry_delay.total_seconds() > 0
        assert task.application == str(APPLICATION)
        assert task.application_args == [
            "maintain",
            "--config",
            str(config_file.resolve()),
            "--pipeline",
            name,
            # Only a run the maintenance asset started passes --due (orders_ld has no triggers).
            *([] if name == "orders_ld" else [DUE_ARG]),
        ]
        assert task._conn_id == "spark_local"
        assert task.jars == "{{ cdc_ingest_jars() }}"
        assert task.env_vars is not None and task.conf is not None
        assert task.env_vars["PYSPARK_PYTHON"] == sys.executable
        assert not any(key.startswith("spark.sql.catalog.") for key in task.conf)
        assert task.catalog is not None and task.catalog.name == "lake"
        assert task.conf["spark.sql.shuffle.partitions"] == "2"


@pytest.mark.usefixtures("clean_env")
def test_jars_resolve_when_the_task_renders(config_file: Path) -> None:
    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    dag = dagbag().dags["ingest_orders_ld"]
    task = dag.get_task("apply_batch")

    jars = dag.get_template_env().from_string(task.jars).render().split(",")

    assert any(j.endswith(".jar") and "iceberg-spark-runtime" in j for j in jars)
    assert all(Path(j).is_file() for j in jars)


@pytest.mark.usefixtures("clean_env")
def test_missing_jars_do_not_break_parsing(
    config_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cdc_ingest import jars

    monkeypatch.setenv(jars.JARS_DIR_VARIABLE, str(tmp_path / "no-jars-here"))
    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    bag = dagbag()

    assert bag.import_errors == {}
    dag = bag.dags["ingest_orders_ld"]
    runtime = jars.job_artifacts()[0].coordinates  # the installed Spark line's Iceberg runtime
    assert runtime.startswith("org.apache.iceberg:iceberg-spark-runtime-")
    missing = f"{re.escape(runtime)}.*cdc-ingest setup"
    with pytest.raises(jars.EnvironmentProblem, match=missing):
        dag.get_template_env().from_string(dag.get_task("apply_batch").jars).render()


@pytest.mark.usefixtures("clean_env")
def test_local_spark_connection_is_the_default(config_file: Path) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    dagbag()

    hook = SparkSubmitHook(conn_id="spark_local")
    assert hook._connection["master"] == "local[*]"


@pytest.mark.usefixtures("clean_env")
def test_configured_connection_is_not_overridden(config_file: Path) -> None:
    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    os.environ["AIRFLOW_CONN_SPARK_LOCAL"] = '{"conn_type":"spark","host":"local[2]"}'
    dagbag()

    assert os.environ["AIRFLOW_CONN_SPARK_LOCAL"] == '{"conn_type":"spark","host":"local[2]"}'


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("catalog: {uri: 'sqlite:///x.db', warehouse: 'file:///w'}\npipelines: []\n", "non-empty"),
        (
            "catalog: {uri: 'sqlite:///x.db', warehouse: 'file:///w'}\n"
            "pipelines:\n  - {name: a, format: nope, landing: 'file:///l', namespace: ods}\n",
            "pipeline 'a': format: 'nope' is unknown",
        ),
        ("catalog: [unclosed\n", "not valid YAML"),
        (
            "catalog: {uri: 'sqlite:///x.db', warehouse: 'file:///w'}\n"
            "pipelines:\n  - {name: a, format: lindorm, landing: 'file:///l', namespace: ods,\n"
            "     maintenance: {retain_snapshots: 7 days}}\n",
            "pipeline 'a': maintenance.retain_snapshots: '7 days' is not a duration like 30s, "
            "15m, 12h or 7d",
        ),
    ],
)
def test_broken_config_is_an_import_error(tmp_path: Path, content: str, reason: str) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(content, encoding="utf-8")
    os.environ["CDC_INGEST_CONFIG"] = str(broken)
    bag = dagbag()

    assert bag.dag_ids == []
    assert len(bag.import_errors) == 1
    [(path, message)] = bag.import_errors.items()
    assert path.endswith("cdc_ingest_dags.py")
    assert "ConfigError" in message
    assert str(broken) in message
    assert reason in message


@pytest.mark.usefixtures("clean_env")
def test_missing_config_file_is_an_import_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    os.environ["CDC_INGEST_CONFIG"] = str(missing)
    bag = dagbag()

    [message] = bag.import_errors.values()
    assert str(missing) in message
    assert "cannot read config file" in message


@pytest.mark.usefixtures("clean_env")
def test_unset_config_defines_no_dags(caplog: pytest.LogCaptureFixture) -> None:
    bag = dagbag()

    assert bag.import_errors == {}
    assert bag.dag_ids == []
    assert "CDC_INGEST_CONFIG is not set" in caplog.text


def test_dag_file_imports_no_pyspark(config_file: Path, airflow_home: Path) -> None:
    # A fresh interpreter: in this one, other tests may already have imported pyspark.
    script = (
        "import runpy, sys\n"
        f"found = runpy.run_path({str(DAG_FILE)!r})\n"
        "assert {'ingest_orders_ld', 'ingest_crm_arcion'} <= set(found), sorted(found)\n"
        "assert 'pyspark' not in sys.modules, 'parsing the DAG file imported pyspark'\n"
    )
    env = {**os.environ, "CDC_INGEST_CONFIG": str(config_file), "AIRFLOW_HOME": str(airflow_home)}
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.usefixtures("clean_env")
def test_aws_connection_is_not_looked_up_while_parsing(tmp_path: Path) -> None:
    from cdc_ingest_airflow.ingest_operator import IngestSparkSubmitOperator

    config = tmp_path / "s3.yaml"
    config.write_text(
        f"catalog: {{uri: 'sqlite:///{tmp_path}/c.db', warehouse: '{tmp_path.as_uri()}/w'}}\n"
        "pipelines:\n  - {name: s3p, format: lindorm, landing: 's3://bucket/p', namespace: ods,\n"
        "     aws_conn_id: not_defined_anywhere}\n",
        encoding="utf-8",
    )
    os.environ["CDC_INGEST_CONFIG"] = str(config)
    bag = dagbag()

    # The connection does not exist: parsing must not notice (it is resolved when tasks run).
    assert bag.import_errors == {}
    task = bag.dags["ingest_s3p"].get_task("apply_batch")
    assert isinstance(task, IngestSparkSubmitOperator)
    assert task.aws_conn_id == "not_defined_anywhere"
    assert task.env_vars is not None
    assert not any(k.startswith("AWS_") for k in task.env_vars)


@pytest.mark.usefixtures("clean_env")
def test_catalog_connections_are_not_looked_up_while_parsing(tmp_path: Path) -> None:
    from cdc_ingest_airflow.aws_connection import CatalogConnectionError
    from cdc_ingest_airflow.ingest_operator import IngestSparkSubmitOperator

    config = tmp_path / "rest.yaml"
    config.write_text(
        "catalog: {type: rest, uri: 'http://127.0.0.1:9/catalog', warehouse: 's3://b/w',\n"
        "          conn_id: no_such_catalog_conn, aws_conn_id: no_such_aws_conn}\n"
        "pipelines:\n  - {name: restp, format: lindorm, landing: 'file:///l', namespace: ods}\n",
        encoding="utf-8",
    )
    os.environ["CDC_INGEST_CONFIG"] = str(config)
    bag = dagbag()

    # Neither connection exists: parsing must not notice; the tasks resolve them when they run.
    assert bag.import_errors == {}
    for dag_id, task_id in (("ingest_restp", "apply_batch"), ("maintain_restp", "maintain_tables")):
        task = bag.dags[dag_id].get_task(task_id)
        assert isinstance(task, IngestSparkSubmitOperator)
        assert task.catalog is not None and task.catalog.conn_id == "no_such_catalog_conn"
        assert task.env_vars is not None
        assert not any(k.startswith("PYICEBERG_") for k in task.env_vars)
    from cdc_ingest_airflow.aws_connection import catalog_environment

    with pytest.raises(
        CatalogConnectionError, match=re.escape("'no_such_aws_conn' (catalog.aws_conn_id)")
    ):
        catalog_environment(task.catalog)
    assert task.catalog is not None
    without_aws = dataclasses.replace(task.catalog, aws_conn_id=None)
    with pytest.raises(
        CatalogConnectionError, match=re.escape("'no_such_catalog_conn' (catalog.conn_id)")
    ):
        catalog_environment(without_aws)


@pytest.mark.usefixtures("clean_env")
def test_apply_batch_emits_table_assets_through_its_pipelines_alias(config_file: Path) -> None:
    from airflow.sdk import AssetAlias

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    bag = dagbag()
    apply = bag.dags["ingest_orders_ld"].get_task("apply_batch")
    assert apply.outlets == [AssetAlias(name="cdc_ingest.orders_ld")]
    # With maintenance triggers (the default), the maintenance asset's alias too.
    apply = bag.dags["ingest_crm_arcion"].get_task("apply_batch")
    assert apply.outlets == [
        AssetAlias(name="cdc_ingest.crm_arcion"),
        AssetAlias(name="cdc_ingest.crm_arcion.maintenance_due"),
    ]
    # Maintenance changes no row: its DAG has no outlets.
    assert all(not t.outlets for t in bag.dags["maintain_orders_ld"].tasks)


def test_an_asset_event_per_changed_table_with_its_counts() -> None:
    from cdc_ingest_airflow.assets import table_events, table_uri

    counts = {"inserted": 0, "updated": 0, "deleted": 0, "dead_lettered": 0, "created": False}
    summary = {
        "pipeline": "shop",
        "batch_id": 7,
        "freshness_ms": 1_700_000_000_000,
        "tables": {
            "orders": {**counts, "inserted": 2, "deleted": 1, "dead_lettered": 1},
            "untouched": {**counts},  # only skipped changes: no event
            "fresh": {**counts, "created": True},  # created empty by a statement
        },
    }
    assert table_events(summary) == {
        "fresh": {
            "pipeline": "shop",
            "batch_id": 7,
            "inserted": 0,
            "updated": 0,
            "deleted": 0,
            "dead_lettered": 0,
            "freshness": "2023-11-14T22:13:20+00:00",
        },
        "orders": {
            "pipeline": "shop",
            "batch_id": 7,
            "inserted": 2,
            "updated": 0,
            "deleted": 1,
            "dead_lettered": 1,
            "freshness": "2023-11-14T22:13:20+00:00",
        },
    }
    assert table_events({**summary, "batch_id": None}) == {}
    assert table_events({**summary, "dry_run": True}) == {}
    assert table_uri("lake", "ods", "orders") == "iceberg://lake/ods/orders"


def test_alerts_are_validated_and_found_in_a_batch_summary() -> None:
    from cdc_ingest.alerts_config import AlertsConfig, breaches
    from cdc_ingest.config_model import ConfigError, validated

    def parse_alerts(raw):
        return validated(AlertsConfig, raw, "alerts")

    alerts = parse_alerts({"max_lag": "15m", "dead_letters": True, "rejected_ddl": True})
    summary = {"batch_id": 3, "freshness_ms": 1_000_000, "dead_lettered": 2, "ddl_rejected": 1}
    assert breaches(summary, alerts, now_s=1000 + 901) == [
        "lag 901 s exceeds max_lag 900 s",
        "2 dead letters (see _cdc_dead_letters)",
        "1 DDL statements rejected (see _cdc_ddl_history)",
    ]
    calm = {"batch_id": 3, "freshness_ms": 1_000_000, "dead_lettered": 0, "ddl_rejected": 0}
    assert breaches(calm, alerts, now_s=1000 + 899) == []
    assert breaches({"batch_id": None}, alerts, now_s=0) == []
    with pytest.raises(ConfigError, match=r"alerts\.max_lag: '15 minutes' is not a duration"):
        parse_alerts({"max_lag": "15 minutes"})
    with pytest.raises(ConfigError, match="unknown key 'lag'"):
        parse_alerts({"lag": "1m"})
    with pytest.raises(ConfigError, match="not the import path of a notifier class"):
        parse_alerts({"notifier": "smtp"})


@pytest.mark.usefixtures("clean_env")
def test_only_a_run_the_maintenance_asset_started_maintains_the_due_tables(
    config_file: Path,
) -> None:
    from airflow.utils.types import DagRunType
    from cdc_ingest_airflow.maintenance_dag import DUE_ARG

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    task = dagbag().dags["maintain_crm_arcion"].get_task("maintain_tables")
    for run_type, flag in (
        (DagRunType.ASSET_TRIGGERED, "--due"),
        (DagRunType.SCHEDULED, ""),
        (DagRunType.MANUAL, ""),
    ):
        context = {"dag_run": dataclasses.make_dataclass("Run", ["run_type"])(run_type)}
        assert task.render_template(DUE_ARG, context) == flag
