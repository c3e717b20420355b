"""The CLI as a process: exit codes, clear errors, and a run killed between commits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cdc_ingest_airflow.pipeline_status import gather
from formats_under_test import FORMATS, TABLE, Changes, keyless_blob_insert

CLI = str(Path(sys.executable).parent / "cdc-ingest")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


def test_bad_config_exits_non_zero_with_one_clear_line(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text(
        "catalog: {uri: 'sqlite:////tmp/x.db', warehouse: 'file:///tmp/x'}\n"
        "pipelines:\n  - {name: p, format: nosuch, landing: 'file:///tmp', namespace: ods}\n"
    )
    done = cli("run", "--config", str(config), "--pipeline", "p")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"cdc-ingest: error: {config}: pipeline 'p': format: 'nosuch' is unknown "
        "(known: lindorm, arcion, debezium-json, oms-default, oms-default-extend, oms-canal, "
        "canal-json, oms-dataworks, oms-shareplex, datahub-tuple, datahub-blob, aerospike, "
        "maxwell-json, ogg-json)"
    ]


def test_missing_pipeline_and_unreadable_landing_exit_non_zero(tmp_path):
    config = tmp_path / "p.yaml"
    config.write_text(
        f"catalog: {{uri: 'sqlite:///{tmp_path}/c.db', warehouse: '{tmp_path.as_uri()}/w'}}\n"
        "pipelines:\n  - {name: p, format: lindorm, namespace: ods, "
        f"landing: '{tmp_path.as_uri()}/nowhere'}}\n"
    )
    missing = cli("run", "--config", str(config), "--pipeline", "q")
    assert missing.returncode == 2 and "no pipeline named 'q' (pipelines: p)" in missing.stderr
    unreadable = cli("run", "--config", str(config), "--pipeline", "p")
    assert unreadable.returncode == 2
    assert (
        f"landing zone {tmp_path.as_uri()}/nowhere is not a readable directory" in unreadable.stderr
    )


@pytest.mark.slow
def test_killed_between_table_commit_and_checkpoint_commit_rerun_is_exact(lake):
    """Kill the job after the tables are committed but before the checkpoint; rerun; compare."""
    c = Changes("arcion")
    lake.add_pipeline("accounts", "arcion", **FORMATS["arcion"]["options"])
    lake.land("accounts", "001.json", [c.insert({"id": 1, "owner": "a", "balance": 1}, 1000)])
    lake.run("accounts")
    second = lake.land(
        "accounts",
        "002.json",
        [
            c.update(
                {"id": 1, "owner": "a", "balance": 1}, {"id": 1, "owner": "a", "balance": 2}, 2000
            ),
            c.insert({"id": 2, "owner": "b", "balance": 3}, 2001),
            c.delete({"id": 2, "owner": "b", "balance": 3}, 2002),
            c.insert({"id": 3, "owner": "c", "balance": 4}, 2003),
            "not json",
        ],
    )
    killed = cli(
        "run",
        "--config",
        str(lake.config_path),
        "--pipeline",
        "accounts",
        env={"CDC_INGEST_FAIL_AT": "after_tables"},
    )
    assert killed.returncode == 99, killed.stderr[-2000:]
    assert lake.table("_cdc_batches").where("batch_id = 2").count() == 0
    # The status page (pyiceberg) shows the half-done batch as one to resume, not as applied.
    [page] = gather(str(lake.config_path)).pipelines
    assert page.checkpoint is not None
    assert (page.checkpoint.last_batch_id, page.checkpoint.awaiting_resume) == (1, 2)
    assert page.checkpoint.files_applied == 1
    # check_landing reads the same state: the planned batch is work, its file still pending.
    from cdc_ingest.config import load_config
    from cdc_ingest_airflow.lake_state import pending

    work = pending(load_config(lake.config_path), "accounts")
    assert (work.files, work.resumes_batch) == ([second.as_uri()], 2)
    assert (page.pending_count, page.pending_files) == (1, [second.as_uri()])
    rerun = cli("run", "--config", str(lake.config_path), "--pipeline", "accounts", "--json")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "batch 2 (resumed)" in rerun.stdout
    assert "5 lines = 4 messages + 1 dead-lettered" in rerun.stdout
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert (summary["batch_id"], summary["resumed"], summary["lines"]) == (2, True, 5)
    assert lake.rows(TABLE, "id", "balance") == [{"id": 1, "balance": 2}, {"id": 3, "balance": 4}]
    assert len(lake.dead_letters()) == 1
    committed = lake.table("_cdc_checkpoints").where("status = 'committed'").count()
    assert committed == 2
    [row] = lake.table("_cdc_batches").where("batch_id = 2").collect()
    assert row["resumed"] and json.loads(row["summary"]) == summary
    assert lake.run("accounts").batch_id is None
    assert lake.table("_cdc_batches").count() == 2
    [page] = gather(str(lake.config_path)).pipelines
    assert page.checkpoint is not None
    assert (page.checkpoint.last_batch_id, page.checkpoint.awaiting_resume) == (2, None)
    assert (page.checkpoint.files_applied, page.pending_count) == (2, 0)


@pytest.mark.slow
def test_killed_after_the_batch_row_rerun_writes_no_second_row(lake):
    """The batch row is written before the checkpoint: a resumed batch finds it and keeps it."""
    c = Changes("arcion")
    lake.add_pipeline("accounts", "arcion", **FORMATS["arcion"]["options"])
    lake.land("accounts", "001.json", [c.insert({"id": 1, "owner": "a", "balance": 1}, 1000)])
    config = ("--config", str(lake.config_path), "--pipeline", "accounts")
    killed = cli("run", *config, env={"CDC_INGEST_FAIL_AT": "before_checkpoint"})
    assert killed.returncode == 99, killed.stderr[-2000:]
    # Read with pyiceberg: this session's JDBC catalog is not opened on the file before the rerun.
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        lake.catalog,
        uri=f"sqlite:///{lake.root / 'catalog.db'}",
        warehouse=(lake.root / "warehouse").as_uri(),
    )
    [first] = catalog.load_table("ods._cdc_batches").scan().to_arrow().to_pylist()
    assert (first["batch_id"], first["inserted"], first["resumed"]) == (1, 1, False)
    rerun = cli("run", *config)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "batch 1 (resumed)" in rerun.stdout
    [row] = lake.table("_cdc_batches").collect()
    assert row["summary"] == first["summary"]
    assert lake.table("_cdc_checkpoints").where("status = 'committed'").count() == 1


def test_append_only_table_killed_before_checkpoint_is_appended_once(lake):
    """A keyless table cannot rely on keys to re-apply safely: the rerun finds its snapshot."""
    row = {"id": 1, "note": "first"}
    message = keyless_blob_insert(row)
    lake.add_pipeline("events", "datahub-blob")
    lake.land("events", "001.json", [message])
    config = ("--config", str(lake.config_path), "--pipeline", "events")
    killed = cli("run", *config, env={"CDC_INGEST_FAIL_AT": "after_tables"})
    assert killed.returncode == 99, killed.stderr[-2000:]
    rerun = cli("run", *config)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "batch 1 (resumed)" in rerun.stdout
    assert lake.rows("events") == [row]


def test_two_pipelines_appending_to_one_keyless_table_keep_both_batches(lake):
    """Batch ids count per pipeline: pipeline b's batch 1 is not pipeline a's, whose append to
    the same keyless table it once took for its own and skipped."""
    for pipeline, row in (("a", {"id": 1, "note": "from a"}), ("b", {"id": 2, "note": "from b"})):
        lake.add_pipeline(pipeline, "datahub-blob")
        lake.land(pipeline, "001.json", [keyless_blob_insert(row)])
    lake.run("a")
    summary = lake.run("b")
    assert summary.tables["events"].inserted == 1
    assert sorted(lake.rows("events"), key=lambda r: r["id"]) == [
        {"id": 1, "note": "from a"},
        {"id": 2, "note": "from b"},
    ]


def test_a_resumed_batch_reports_its_own_pipelines_counts(lake):
    """Pipeline a's batch 1 inserted two rows into t; pipeline b's batch 1, killed after its
    tables and resumed, inserted one: it reports one, not a's commit of the same batch id."""
    from canal_messages import canal_message

    lake.add_pipeline("a", "canal-json")
    lake.add_pipeline("b", "canal-json")
    lake.land(
        "a",
        "001.json",
        [canal_message("t", "INSERT", {"id": str(i), "v": "a"}, 1000 + i) for i in (1, 2)],
    )
    lake.run("a")
    lake.land("b", "001.json", [canal_message("t", "INSERT", {"id": "3", "v": "b"}, 2000)])
    config = ("--config", str(lake.config_path), "--pipeline", "b")
    killed = cli("run", *config, env={"CDC_INGEST_FAIL_AT": "after_tables"})
    assert killed.returncode == 99, killed.stderr[-2000:]
    rerun = cli("run", *config)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "batch 1 (resumed)" in rerun.stdout
    [row] = lake.table("_cdc_batches").where("pipeline = 'b'").collect()
    assert (row["batch_id"], row["inserted"], row["resumed"]) == (1, 1, True)
    assert sorted(r["id"] for r in lake.rows("t")) == [1, 2, 3]


def test_a_batch_with_ddl_does_not_claim_a_table_another_pipeline_created(lake):
    """Pipeline a's batch 1 created t; pipeline b's batch 1 alters and inserts into it (the
    path of batches with DDL, which asks the table which batch created it): b created nothing."""
    from canal_messages import TEXT, canal_message, ddl_message

    lake.add_pipeline("a", "canal-json")
    lake.add_pipeline("b", "canal-json")
    lake.land("a", "001.json", [canal_message("t", "INSERT", {"id": "1", "v": "a"}, 1000)])
    assert lake.run("a").tables["t"].created is True
    lake.land(
        "b",
        "001.json",
        [
            ddl_message("t", "ALTER TABLE t ADD COLUMN w varchar(10)", "ALTER", 2000),
            canal_message(
                "t", "INSERT", {"id": "2", "v": "b", "w": "x"}, 2001, {**TEXT, "w": "VARCHAR(10)"}
            ),
        ],
    )
    summary = lake.run("b")
    assert (summary.tables["t"].created, summary.tables["t"].inserted) == (False, 1)
    assert sorted((r["id"], r["v"], r["w"]) for r in lake.rows("t")) == [
        (1, "a", None),
        (2, "b", "x"),
    ]


def test_run_flags_parse_as_airflow_renders_them():
    from cdc_ingest.cli import _parser

    base = ["run", "--config", "c.yaml", "--pipeline", "p"]
    unset = _parser().parse_args([*base, "--tables=", "--max-files=", "--dry-run=false"])
    assert (unset.tables, unset.max_files, unset.dry_run, unset.json) == ((), None, False, False)
    set_ = _parser().parse_args(
        [*base, "--tables=b,a", "--max-files=3", "--dry-run=true", "--run-id=r1", "--json"]
    )
    assert (set_.tables, set_.max_files, set_.dry_run, set_.run_id) == (("a", "b"), 3, True, "r1")
    assert _parser().parse_args([*base, "--dry-run"]).dry_run is True


@pytest.mark.parametrize("flag", ["--max-files=0", "--max-files=x", "--dry-run=maybe"])
def test_bad_run_flags_exit_2(flag):
    done = cli("run", "--config", "c.yaml", "--pipeline", "p", flag)
    assert done.returncode == 2 and flag.split("=")[0] in done.stderr


def test_a_run_with_nothing_new_answers_without_starting_a_jvm(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", **FORMATS["debezium-json"]["options"])
    lake.land("accounts", "001.json", [c.insert({"id": 1, "owner": "a", "balance": 1}, 1000)])
    lake.run("accounts")
    config = ("--config", str(lake.config_path), "--pipeline", "accounts")
    # No Java here: a run that needed Spark could not start it.
    no_jvm = {"JAVA_HOME": str(lake.root / "no-java"), "PATH": "/usr/bin:/bin"}
    idle = cli("run", *config, "--json", env=no_jvm)
    assert idle.returncode == 0, idle.stderr[-2000:]
    assert idle.stdout.splitlines()[0] == "pipeline accounts: nothing new to apply"
    assert json.loads(idle.stdout.splitlines()[-1])["batch_id"] is None
    lake.land("accounts", "002.json", [c.insert({"id": 2, "owner": "b", "balance": 2}, 2000)])
    busy = cli("run", *config, env=no_jvm)
    assert busy.returncode != 0 and "nothing new" not in busy.stdout


def test_a_driver_jvm_that_cannot_start_is_one_line_and_exit_2(lake):
    """A JVM option it refuses (here an agent that is not there) ends the driver before Spark
    answers: one line, not pyspark's traceback, and the batch stays pending."""
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", **FORMATS["debezium-json"]["options"])
    lake.land("accounts", "001.json", [c.insert({"id": 1, "owner": "a", "balance": 1}, 1000)])
    config = ("--config", str(lake.config_path), "--pipeline", "accounts", "--cold")
    done = cli("run", *config, env={"SPARK_SUBMIT_OPTS": "-javaagent:/nonexistent/agent.jar"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    ours = [line for line in done.stderr.splitlines() if line.startswith("cdc-ingest:")]
    assert ours == [
        "cdc-ingest: error: pipeline accounts: catalog or engine failure: the Spark driver's "
        "JVM exited as it started (its own message is above)"
    ]
    rerun = cli("run", *config)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert lake.rows("accounts") == [{"id": 1, "owner": "a", "balance": 1}]
