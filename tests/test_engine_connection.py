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
