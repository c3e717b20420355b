"""The Airflow connection naming the warm engine (``cdc_ingest_airflow.engine_connection``),
looked up through Airflow's own environment-variable secrets backend."""

from __future__ import annotations

import json

import pytest
from cdc_ingest_airflow.engine_connection import EngineConnectionError, engine_environment


def test_the_connection_names_the_engine_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"dir": "/srv/cdc/engine"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_ENGINE_HERE", json.dumps({"conn_type": "generic", "extra": extra})
    )
    assert engine_environment("engine_here") == {"CDC_INGEST_ENGINE_DIR": "/srv/cdc/engine"}


def test_no_connection_leaves_the_workers_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_ENGINE_NOWHERE", raising=False)
    assert engine_environment("engine_nowhere") == {}


def test_a_connection_without_a_directory_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ENGINE_EMPTY", json.dumps({"conn_type": "generic"}))
    with pytest.raises(EngineConnectionError, match="names no directory"):
        engine_environment("engine_empty")


def test_a_named_engine_that_does_not_answer_leaves_the_task_to_spark_submit(
    monkeypatch: pytest.MonkeyPatch, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The connection names a directory where no engine runs: the task says so in its log and
    runs the job by spark-submit (``run_on_engine`` False) rather than failing."""
    from cdc_ingest_airflow.engine_connection import run_on_engine
    from cdc_ingest_airflow.ingest_operator import IngestSparkSubmitOperator

    gone = tmp_path / "engine"
    gone.mkdir()
    monkeypatch.setenv(
        "AIRFLOW_CONN_ENGINE_GONE",
        json.dumps({"conn_type": "generic", "extra": {"dir": str(gone)}}),
    )
    monkeypatch.delenv("CDC_INGEST_ENGINE_DIR", raising=False)
    task = IngestSparkSubmitOperator(
        task_id="apply_batch",
        application="ingest_job.py",
        application_args=["run", "--config", str(tmp_path / "pipelines.yaml")],
        engine_conn_id="engine_gone",
    )
    args = list(task.application_args or [])
    assert run_on_engine(task.engine_conn_id, args, {}, task.log) is False
    # Airflow's task logger (structlog) writes to the task's output.
    logged = capsys.readouterr().out
    assert "[warning" in logged
    assert (
        f"the warm engine of connection engine_gone ({gone}) does not answer: spark-submit instead"
        in logged
    )
