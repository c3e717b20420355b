"""The Airflow DAGs generated from a pipelines file, as the DAG processor sees them (no Spark)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
DAG_FOLDER = REPO / "dags"
DAG_FILE = DAG_FOLDER / "cdc_ingest_dags.py"
APPLICATION = REPO / "jobs" / "ingest_job.py"


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A throw-away AIRFLOW_HOME, set before anything in this session imports airflow.

    Airflow reads AIRFLOW_HOME once, when it is first imported, so the airflow imports in this
    module all happen inside tests, after this fixture has run.
    """
    home = tmp_path_factory.mktemp("airflow-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_HOME", str(home))
        mp.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
        mp.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(DAG_FOLDER))
        yield home


@pytest.fixture
def clean_env(airflow_home: Path) -> Iterator[None]:
    """Restore os.environ afterwards: parsing the DAG file sets AIRFLOW_CONN_SPARK_LOCAL."""
    saved = dict(os.environ)
    os.environ.pop("AIRFLOW_CONN_SPARK_LOCAL", None)
    os.environ.pop("CDC_INGEST_CONFIG", None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """Two pipelines: a scheduled Lindorm one with 4 retries, an unscheduled Arcion one."""
    path = tmp_path / "pipelines.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            catalog:
              name: lake
              uri: sqlite:///{tmp_path}/catalog.db
              warehouse: file://{tmp_path}/warehouse
            spark:
              conf:
                spark.sql.shuffle.partitions: "2"
            pipelines:
              - name: orders_ld
                format: lindorm
                landing: file://{tmp_path}/landing/orders
                namespace: ods
                schedule: "*/5 * * * *"
                retries: 4
                maintenance:
                  schedule: "0 3 * * *"
                  retain_snapshots: 5
                  orphan_older_than: 2d
                keys:
                  orders: [id]
              - name: crm_arcion
                format: arcion
                landing: file://{tmp_path}/landing/crm
                namespace: ods
            """
        ),
        encoding="utf-8",
    )
    return path


def _dagbag() -> Any:
    from airflow.models import DagBag

    # Airflow 3 has no include_examples argument; AIRFLOW__CORE__LOAD_EXAMPLES=False covers it.
    return DagBag(dag_folder=str(DAG_FOLDER))


@pytest.mark.usefixtures("clean_env")
def test_one_dag_per_pipeline(config_file: Path) -> None:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    bag = _dagbag()

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
        assert isinstance(task, SparkSubmitOperator)
        assert task.retries == retries
        assert task.retry_delay.total_seconds() > 0
        assert task.application == str(APPLICATION)
        assert Path(task.application).is_absolute() and Path(task.application).is_file()
        assert task.application_args == [
            "run",
            "--config",
            str(config_file.resolve()),
            "--pipeline",
            name,
            "--tables={{ params.tables | join(',') }}",
            "--max-files={{ params.max_files if params.max_files is not none else '' }}",
            "--dry-run={{ 'true' if params.dry_run else 'false' }}",
            "--run-id={{ run_id }}",
            "--replay-from={{ data_interval_start.isoformat() if dag_run.run_type == 'backfill' "
            "else (params.replay_from or '') }}",
            "--replay-to={{ data_interval_end.isoformat() if dag_run.run_type == 'backfill' "
            "else (params.replay_to or '') }}",
            "--rebuild-tables={{ '' if dag_run.run_type == 'backfill' "
            "else params.rebuild_tables | join(',') }}",
        ]
        # Backfill runs do not count towards max_active_runs: one batch of a pipeline at a time.
        assert task.max_active_tis_per_dag == 1
        assert task._conn_id == "spark_local"
        assert task.name == f"cdc-ingest-{name}"
        assert task.env_vars["PYSPARK_PYTHON"] == sys.executable
        assert str(REPO / "jobs") in task.env_vars["PYTHONPATH"].split(os.pathsep)
        assert task.conf["spark.sql.catalog.lake.type"] == "jdbc"
        assert task.conf["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")
        # The pipelines file's own spark.conf wins over the defaults.
        assert task.conf["spark.sql.shuffle.partitions"] == "2"


@pytest.mark.usefixtures("clean_env")
def test_one_maintenance_dag_per_pipeline(config_file: Path) -> None:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    bag = _dagbag()

    assert bag.import_errors == {}
    configured, default = bag.dags["maintain_orders_ld"], bag.dags["maintain_crm_arcion"]
    assert configured.schedule == "0 3 * * *"
    assert default.schedule == "@daily"
    assert "keeping the last 5 snapshots" in configured.doc_md
    assert "older than 2d" in configured.doc_md
    assert "keeping the snapshots of the last 7d" in default.doc_md
    for dag, name, retries in ((configured, "orders_ld", 4), (default, "crm_arcion", 2)):
        assert dag.max_active_runs == 1
        assert dag.catchup is False
        assert set(dag.tags) == {"cdc-ingest", "maintenance"}
        assert dag.task_ids == ["maintain_tables"]
        task = dag.get_task("maintain_tables")
        assert isinstance(task, SparkSubmitOperator)
        assert task.retries == retries
        assert task.retry_delay.total_seconds() > 0
        assert task.application == str(APPLICATION)
        assert task.application_args == [
            "maintain",
            "--config",
            str(config_file.resolve()),
            "--pipeline",
            name,
        ]
        assert task._conn_id == "spark_local"
        assert task.jars == "{{ cdc_ingest_jars() }}"
        assert task.env_vars["PYSPARK_PYTHON"] == sys.executable
        assert task.conf["spark.sql.catalog.lake.type"] == "jdbc"
        assert task.conf["spark.sql.shuffle.partitions"] == "2"


@pytest.mark.usefixtures("clean_env")
def test_params_are_declared_validated_and_passed_as_flags(config_file: Path) -> None:
    from airflow.providers.standard.operators.python import ShortCircuitOperator
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError
    from airflow.utils.types import DagRunType

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    dag = _dagbag().dags["ingest_orders_ld"]
    assert isinstance(dag.get_task("check_landing"), ShortCircuitOperator)

    params = dag.params
    assert set(params.keys()) == {
        "tables",
        "dry_run",
        "max_files",
        "replay_from",
        "replay_to",
        "rebuild_tables",
    }
    assert params.get_param("tables").schema["type"] == "array"
    assert params.get_param("tables").schema["items"]["type"] == "string"
    assert params.get_param("dry_run").schema["type"] == "boolean"
    max_files = params.get_param("max_files")
    assert max_files.schema == {"type": ["null", "integer"], "minimum": 1, "title": "Max files"}
    assert max_files.description and "oldest first" in max_files.description
    unset = {"replay_from": None, "replay_to": None, "rebuild_tables": []}
    assert params.validate() == {"tables": [], "dry_run": False, "max_files": None, **unset}

    def validated(**values: Any) -> dict[str, Any]:
        merged = ParamsDict({k: params.get_param(k) for k in params})
        merged.update(values)
        return dict(merged.validate())

    assert validated(tables=["orders", "items"], max_files=3)["max_files"] == 3
    for good in ("2026-11-20", "2026-11-20T06:00:00Z", "2026-11-20T06:00:00.5+00:00"):
        assert validated(replay_from=good, replay_to=good)["replay_from"] == good
    assert validated(rebuild_tables=["orders"])["rebuild_tables"] == ["orders"]
    for bad in (
        {"max_files": 0},
        {"max_files": "two"},
        {"tables": "orders"},
        {"dry_run": "x"},
        {"replay_from": "yesterday"},
        {"replay_to": "2026-11-20 junk"},
        {"replay_from": 20261120},
        {"rebuild_tables": "orders"},
        {"rebuild_tables": ["orders", "orders"]},
        {"rebuild_tables": ["ods.orders"]},
    ):
        with pytest.raises((ParamValidationError, ValueError)):
            validated(**bad)

    args = dag.get_task("apply_batch").application_args
    env = dag.get_template_env()
    interval = {
        "data_interval_start": datetime(2026, 11, 20, tzinfo=UTC),
        "data_interval_end": datetime(2026, 11, 21, tzinfo=UTC),
    }
    manual = {**interval, "dag_run": SimpleNamespace(run_type="manual"), "run_id": "manual__1"}
    context = {
        "params": {
            "tables": ["orders", "items"],
            "dry_run": True,
            "max_files": 2,
            "replay_from": "2026-11-01",
            "replay_to": None,
            "rebuild_tables": [],
        }
    }
    rendered = [env.from_string(a).render(**context, **manual) for a in args[5:]]
    assert rendered == [
        "--tables=orders,items",
        "--max-files=2",
        "--dry-run=true",
        "--run-id=manual__1",
        "--replay-from=2026-11-01",
        "--replay-to=",
        "--rebuild-tables=",
    ]
    defaults = {"params": {"tables": [], "dry_run": False, "max_files": None, **unset}}
    scheduled = {**manual, "dag_run": SimpleNamespace(run_type="scheduled"), "run_id": "r"}
    rendered = [env.from_string(a).render(**defaults, **scheduled) for a in args[5:]]
    assert rendered == [
        "--tables=",
        "--max-files=",
        "--dry-run=false",
        "--run-id=r",
        "--replay-from=",
        "--replay-to=",
        "--rebuild-tables=",
    ]
    # A backfill run replays its data interval.
    backfill = {**manual, "dag_run": SimpleNamespace(run_type=DagRunType.BACKFILL_JOB)}
    rendered = [env.from_string(a).render(**defaults, **backfill) for a in args[9:]]
    assert rendered == [
        "--replay-from=2026-11-20T00:00:00+00:00",
        "--replay-to=2026-11-21T00:00:00+00:00",
        "--rebuild-tables=",
    ]


@pytest.mark.usefixtures("clean_env")
def test_jars_resolve_when_the_task_renders(config_file: Path) -> None:
    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    dag = _dagbag().dags["ingest_orders_ld"]
    task = dag.get_task("apply_batch")

    jars = dag.get_template_env().from_string(task.jars).render().split(",")

    assert any(j.endswith(".jar") and "iceberg-spark-runtime" in j for j in jars)
    assert all(Path(j).is_file() for j in jars)


@pytest.mark.usefixtures("clean_env")
def test_missing_jars_do_not_break_parsing(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdc_ingest import spark_session

    def no_jar() -> str:
        raise spark_session.EnvironmentProblem("iceberg runtime jar not found (test)")

    monkeypatch.setattr(spark_session, "iceberg_runtime_jar", no_jar)
    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    bag = _dagbag()

    assert bag.import_errors == {}
    dag = bag.dags["ingest_orders_ld"]
    with pytest.raises(spark_session.EnvironmentProblem, match="iceberg runtime jar not found"):
        dag.get_template_env().from_string(dag.get_task("apply_batch").jars).render()


@pytest.mark.usefixtures("clean_env")
def test_local_spark_connection_is_the_default(config_file: Path) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    _dagbag()

    hook = SparkSubmitHook(conn_id="spark_local")
    assert hook._connection["master"] == "local[*]"


@pytest.mark.usefixtures("clean_env")
def test_configured_connection_is_not_overridden(config_file: Path) -> None:
    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    os.environ["AIRFLOW_CONN_SPARK_LOCAL"] = '{"conn_type":"spark","host":"local[2]"}'
    _dagbag()

    assert os.environ["AIRFLOW_CONN_SPARK_LOCAL"] == '{"conn_type":"spark","host":"local[2]"}'


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("catalog: {uri: 'sqlite:///x.db', warehouse: 'file:///w'}\npipelines: []\n", "non-empty"),
        (
            "catalog: {uri: 'sqlite:///x.db', warehouse: 'file:///w'}\n"
            "pipelines:\n  - {name: a, format: nope, landing: 'file:///l', namespace: ods}\n",
            "unknown format 'nope'",
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
    bag = _dagbag()

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
    bag = _dagbag()

    [message] = bag.import_errors.values()
    assert str(missing) in message
    assert "cannot read config file" in message


@pytest.mark.usefixtures("clean_env")
def test_unset_config_defines_no_dags(caplog: pytest.LogCaptureFixture) -> None:
    bag = _dagbag()

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
    from cdc_ingest_airflow.aws_connection import IngestSparkSubmitOperator

    config = tmp_path / "s3.yaml"
    config.write_text(
        f"catalog: {{uri: 'sqlite:///{tmp_path}/c.db', warehouse: '{tmp_path.as_uri()}/w'}}\n"
        "pipelines:\n  - {name: s3p, format: lindorm, landing: 's3://bucket/p', namespace: ods,\n"
        "     aws_conn_id: not_defined_anywhere}\n",
        encoding="utf-8",
    )
    os.environ["CDC_INGEST_CONFIG"] = str(config)
    bag = _dagbag()

    # The connection does not exist: parsing must not notice (it is resolved when tasks run).
    assert bag.import_errors == {}
    task = bag.dags["ingest_s3p"].get_task("apply_batch")
    assert isinstance(task, IngestSparkSubmitOperator)
    assert task.aws_conn_id == "not_defined_anywhere"
    assert not any(k.startswith("AWS_") for k in task.env_vars)
