"""Through Airflow: apply_batch dies between the table commit and the checkpoint commit; the task
is cleared in the metadata DB (``airflow tasks clear``) and the run of the same logical date is run
again (``airflow dags test``); the table and ``_cdc_checkpoints`` come out exact.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml
from airflow_runner import airflow, airflow_env, migrate, require_stack, tail, task_states
from formats_under_test import FORMATS, TABLE, Changes

DAG_ID = "ingest_accounts"
LOGICAL_DATE = "2026-01-01T00:00:00+00:00"


def _land(landing: Path) -> list[str]:
    c = Changes("arcion")
    first = [
        c.insert({"id": 1, "owner": "a", "balance": 1}, 1000),
        c.insert({"id": 2, "owner": "b", "balance": 3}, 1001),
    ]
    second = [
        c.update(
            {"id": 1, "owner": "a", "balance": 1}, {"id": 1, "owner": "a", "balance": 2}, 2000
        ),
        c.delete({"id": 2, "owner": "b", "balance": 3}, 2001),
        c.insert({"id": 3, "owner": "c", "balance": 4}, 2002),
        "not json",
    ]
    uris = []
    for name, lines in (("001.json", first), ("002.json", second)):
        path = landing / name
        path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
        uris.append(path.as_uri())
    return uris


def _dag_run(home: Path) -> tuple[str, str]:
    """The run id and state of the DAG's one run (of the test's logical date)."""
    with sqlite3.connect(home / "airflow.db") as db:
        [(run_id, state)] = db.execute(
            "SELECT run_id, state FROM dag_run WHERE dag_id = ?", (DAG_ID,)
        ).fetchall()
    return str(run_id), str(state)


@pytest.mark.slow
def test_apply_batch_killed_mid_batch_is_cleared_and_rerun_exactly(tmp_path: Path) -> None:
    require_stack()
    landing = tmp_path / "landing"
    landing.mkdir()
    uris = _land(landing)
    catalog_uri = f"sqlite:///{tmp_path}/catalog.db"
    warehouse = f"file://{tmp_path}/warehouse"
    config = tmp_path / "pipelines.yaml"
    pipeline = {
        "name": "accounts",
        "format": "arcion",
        "landing": landing.as_uri(),
        "namespace": "ods",
        # The retry is Airflow's clear, not the task's own retries.
        "retries": 0,
        **FORMATS["arcion"]["options"],
    }
    config.write_text(
        yaml.safe_dump(
            {
                "catalog": {"name": "lake", "uri": catalog_uri, "warehouse": warehouse},
                "pipelines": [pipeline],
            }
        ),
        encoding="utf-8",
    )
    home = tmp_path / "airflow"
    env = airflow_env(home, config)
    migrate(env, tmp_path)

    # Airflow's environment reaches spark-submit's: the job exits abruptly once the tables are
    # committed and before the checkpoint is.
    killed = airflow(
        ["dags", "test", DAG_ID, LOGICAL_DATE],
        {**env, "CDC_INGEST_FAIL_AT": "after_tables"},
        tmp_path,
    )
    assert "Error code is: 99" in killed.stdout + killed.stderr, tail(killed)
    killed_run, state = _dag_run(home)
    assert state == "failed"
    assert task_states(home) == {
        killed_run: {
            "check_landing": "success",
            "apply_batch": "failed",
            "batch_summary": "upstream_failed",
        }
    }

    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("lake", uri=catalog_uri, warehouse=warehouse)

    def checkpoints() -> list[dict[str, object]]:
        table = catalog.load_table("ods._cdc_checkpoints")
        rows = table.scan(selected_fields=("batch_id", "status", "file")).to_arrow().to_pylist()
        return sorted(rows, key=lambda r: (r["status"], r["file"] or ""))

    def rows() -> list[dict[str, object]]:
        table = catalog.load_table(f"ods.{TABLE}")
        found = table.scan(selected_fields=("id", "balance")).to_arrow().to_pylist()
        return sorted(found, key=lambda r: r["id"])

    # The kill landed mid-batch: the changes are in the table, the batch is planned, not committed.
    assert rows() == [{"id": 1, "balance": 2}, {"id": 3, "balance": 4}]
    assert {r["status"] for r in checkpoints()} == {"planned"}

    cleared = airflow(
        [
            "tasks",
            "clear",
            DAG_ID,
            # Airflow 3.3 matches this "regex" as a task id: "^apply_batch$" selects nothing.
            "-t",
            "apply_batch",
            "-d",
            "-y",
        ],
        env,
        tmp_path,
    )
    assert cleared.returncode == 0, tail(cleared)
    assert task_states(home)[killed_run] == {
        "check_landing": "success",
        "apply_batch": None,
        "batch_summary": None,
    }, tail(cleared)
    assert _dag_run(home) == (killed_run, "queued")

    rerun = airflow(["dags", "test", DAG_ID, LOGICAL_DATE], env, tmp_path)
    output = rerun.stdout + rerun.stderr
    finished = [line for line in output.splitlines() if "DagRun Finished" in line]
    assert finished and "state=success" in finished[-1], tail(rerun)
    assert "a planned batch awaits its commit: resuming it" in output, tail(rerun)
    # `dags test` of the same logical date replaces the cleared run with a fresh run id.
    rerun_id, state = _dag_run(home)
    assert state == "success"
    assert task_states(home) == {
        rerun_id: {"check_landing": "success", "apply_batch": "success", "batch_summary": "success"}
    }

    # Nothing lost, nothing doubled: the rows, one dead letter, one committed batch of both files.
    assert rows() == [{"id": 1, "balance": 2}, {"id": 3, "balance": 4}]
    dead = catalog.load_table("ods._cdc_dead_letters").scan().to_arrow().to_pylist()
    assert [(d["file"], d["line"]) for d in dead] == [(uris[1], 4)]
    assert checkpoints() == [
        {"batch_id": 1, "status": "applied", "file": uris[0]},
        {"batch_id": 1, "status": "applied", "file": uris[1]},
        {"batch_id": 1, "status": "committed", "file": None},
        {"batch_id": 1, "status": "planned", "file": uris[0]},
        {"batch_id": 1, "status": "planned", "file": uris[1]},
    ]
    [batch] = catalog.load_table("ods._cdc_batches").scan().to_arrow().to_pylist()
    assert (batch["batch_id"], batch["run_id"], batch["resumed"]) == (1, rerun_id, True)
    summary = json.loads(batch["summary"])
    assert (summary["lines"], summary["messages"], summary["dead_lettered"]) == (6, 5, 1)
