"""The ingest DAGs' Params: declared, validated in the trigger form, rendered as CLI flags."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from dag_fixtures import dagbag


@pytest.mark.usefixtures("clean_env")
def test_params_are_declared_validated_and_passed_as_flags(config_file: Path) -> None:
    from airflow.providers.standard.operators.python import ShortCircuitOperator
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError
    from airflow.utils.types import DagRunType

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    dag = dagbag().dags["ingest_orders_ld"]
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
    unset: dict[str, object] = {"replay_from": None, "replay_to": None, "rebuild_tables": []}
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
def test_the_flags_a_dag_run_renders_are_the_options_the_job_parses(config_file: Path) -> None:
    from airflow.utils.types import DagRunType
    from cdc_ingest.cli import _parser
    from cdc_ingest.landing.landed_time import LandedRange
    from cdc_ingest.run.options import RunOptions, parsed_options

    os.environ["CDC_INGEST_CONFIG"] = str(config_file)
    dag = dagbag().dags["ingest_orders_ld"]
    args = dag.get_task("apply_batch").application_args
    env = dag.get_template_env()
    interval = {
        "data_interval_start": datetime(2026, 11, 20, tzinfo=UTC),
        "data_interval_end": datetime(2026, 11, 21, tzinfo=UTC),
        "run_id": "r1",
    }

    def job_options(run_type: str, **params: Any) -> RunOptions:
        context = {**interval, "dag_run": SimpleNamespace(run_type=run_type)}
        values = {**dag.params.validate(), **params}
        rendered = [env.from_string(a).render(params=values, **context) for a in args]
        return parsed_options(_parser().parse_args(rendered))

    assert job_options("manual", tables=["orders", "items"], max_files=2) == RunOptions(
        tables=("items", "orders"), max_files=2, run_id="r1"
    )
    assert job_options("scheduled", dry_run=True) == RunOptions(dry_run=True, run_id="r1")
    assert job_options("manual", replay_to="2026-11-02T06:00:00+01:00") == RunOptions(
        run_id="r1", landed=LandedRange(None, datetime(2026, 11, 2, 5, tzinfo=UTC))
    )
    assert job_options("manual", rebuild_tables=["orders"]) == RunOptions(
        run_id="r1", rebuild_tables=("orders",)
    )
    backfill = job_options(DagRunType.BACKFILL_JOB, rebuild_tables=["orders"])
    assert backfill == RunOptions(
        run_id="r1",
        landed=LandedRange(datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 11, 21, tzinfo=UTC)),
    )
