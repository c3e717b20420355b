"""The warm engine (``cdc-ingest engine``): runs go to it, concurrent pipelines stay apart, its
death mid-batch fails the run in one line and the rerun applies the batch exactly once, and a
start finds a running engine or replaces a dead one. Real processes throughout: the CLI, the
engine's driver, Spark and SQLite catalogs."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from canal_messages import canal_message

CLI = str(Path(sys.executable).parent / "cdc-ingest")
# The engines of the tests hold a heap of this size from their start (the default is 4g).
ENGINE_HEAP = "2g"


class Pipeline:
    """A Canal pipeline ``shop`` in a SQLite catalog of its own, landing files by hand."""

    def __init__(self, root: Path, catalog: str) -> None:
        self.root, self.catalog, self.files = root, catalog, 0
        (root / "landing").mkdir(parents=True)
        self.config = root / "pipelines.yaml"
        doc = {
            "catalog": {
                "name": catalog,
                "uri": f"sqlite:///{root / 'catalog.db'}",
                "warehouse": (root / "warehouse").as_uri(),
            },
            "pipelines": [
                {
                    "name": "shop",
                    "format": "canal-json",
                    "landing": (root / "landing").as_uri(),
                    "namespace": "ods",
                }
            ],
        }
        self.config.write_text(yaml.safe_dump(doc))

    def land(self, *messages: dict[str, Any]) -> None:
        self.files += 1
        lines = "".join(json.dumps(m) + "\n" for m in messages)
        (self.root / "landing" / f"{self.files:04d}.json").write_text(lines)

    def command(self, *extra: str) -> list[str]:
        return [CLI, "run", "--config", str(self.config), "--pipeline", "shop", "--json", *extra]

    def rows(self) -> list[tuple[int, str]]:
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog(
            self.catalog,
            uri=f"sqlite:///{self.root / 'catalog.db'}",
            warehouse=(self.root / "warehouse").as_uri(),
        )
        table = catalog.load_table(("ods", "items")).scan(selected_fields=("id", "v")).to_arrow()
        return sorted((int(r["id"]), r["v"]) for r in table.to_pylist())


def summary(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return parsed


@pytest.fixture(scope="module")
def engine_env(tmp_path_factory) -> Iterator[dict[str, str]]:
    """An engine of the module's own, started and stopped by the CLI."""
    place = tmp_path_factory.mktemp("engine")
    env = {**os.environ, "CDC_INGEST_ENGINE_DIR": str(place), "SPARK_DRIVER_MEMORY": ENGINE_HEAP}
    started = subprocess.run([CLI, "engine", "start"], env=env, capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith(f"engine started in {place} (pid ")
    yield env
    subprocess.run([CLI, "engine", "stop"], env=env, capture_output=True, text=True)


def engine_status(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "engine", "status"], env=env, capture_output=True, text=True)


def batches_done(env: dict[str, str]) -> int:
    status = engine_status(env)
    assert status.returncode == 0, status.stdout
    return int(status.stdout.split(" batches done")[0].rsplit(" ", 1)[1])


def run(env: dict[str, str], pipeline: Pipeline, *extra: str, **more: str):
    return subprocess.run(
        pipeline.command(*extra), env={**env, **more}, capture_output=True, text=True
    )


def test_runs_go_to_the_engine_and_apply_as_cold_runs_do(engine_env, tmp_path):
    shop = Pipeline(tmp_path, "warm")
    shop.land(
        canal_message("items", "INSERT", {"id": "1", "v": "a"}, 1000),
        canal_message("items", "INSERT", {"id": "2", "v": "b"}, 1001),
    )
    before = batches_done(engine_env)
    first = summary(run(engine_env, shop))
    shop.land(
        canal_message("items", "UPDATE", {"id": "1", "v": "a2"}, 1002),
        canal_message("items", "DELETE", {"id": "2", "v": "b"}, 1003),
        canal_message("items", "INSERT", {"id": "3", "v": "c"}, 1004),
    )
    second = summary(run(engine_env, shop))
    assert batches_done(engine_env) == before + 2
    assert (first["batch_id"], second["batch_id"]) == (1, 2)
    assert shop.rows() == [(1, "a2"), (3, "c")]
    # --cold starts Spark in the process: the engine does not see the run.
    shop.land(canal_message("items", "INSERT", {"id": "4", "v": "d"}, 1005))
    cold = run(engine_env, shop, "--cold")
    assert summary(cold)["batch_id"] == 3
    assert batches_done(engine_env) == before + 2
    assert shop.rows() == [(1, "a2"), (3, "c"), (4, "d")]


def test_a_first_batch_into_a_catalog_that_exists_applies_on_the_engine(engine_env, tmp_path):
    """A catalog database that exists (PostgreSQL's, or a SQLite file made by another tool):
    pyiceberg creates the namespace, and Spark first meets the batch's catalog in a direct JVM
    call, which reads the settings of the thread's active session (once the engine's own)."""
    from pyiceberg.catalog.sql import SqlCatalog

    shop = Pipeline(tmp_path, "ready")
    SqlCatalog("ready", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse="file:///unused")
    shop.land(canal_message("items", "INSERT", {"id": "1", "v": "a"}, 1000))

    done = summary(run(engine_env, shop))

    assert (done["dead_lettered"], done["tables"]["items"]["inserted"]) == (0, 1)
    assert shop.rows() == [(1, "a")]


def test_concurrent_pipelines_are_isolated_and_one_failure_stays_its_own(engine_env, tmp_path):
    good, bad = Pipeline(tmp_path / "good", "good"), Pipeline(tmp_path / "bad", "bad")
    good.land(canal_message("items", "INSERT", {"id": "1", "v": "x"}, 1000))
    bad.land(canal_message("items", "INSERT", {"id": "1", "v": "y"}, 1000))
    # The bad pipeline's catalog database is a directory: its catalog fails on first use.
    (bad.root / "catalog.db").mkdir()
    runs = [
        subprocess.Popen(
            p.command(), env=engine_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for p in (good, bad)
    ]
    (good_out, good_err), (_, bad_err) = (r.communicate(timeout=600) for r in runs)
    assert runs[0].returncode == 0, good_err
    assert json.loads(good_out.strip().splitlines()[-1])["batch_id"] == 1
    assert good.rows() == [(1, "x")]
    assert runs[1].returncode == 2
    [line] = bad_err.strip().splitlines()
    assert line.startswith("cdc-ingest: error: pipeline shop: catalog or engine failure: ")
    # The engine is still there for the next batch.
    good.land(canal_message("items", "UPDATE", {"id": "1", "v": "x2"}, 1001))
    assert summary(run(engine_env, good))["batch_id"] == 2
    assert good.rows() == [(1, "x2")]


def test_engine_death_mid_batch_fails_in_one_line_and_the_rerun_applies_once(engine_env, tmp_path):
    shop = Pipeline(tmp_path, "dies")
    shop.land(canal_message("items", "INSERT", {"id": "1", "v": "a"}, 1000))
    summary(run(engine_env, shop))
    shop.land(
        canal_message("items", "UPDATE", {"id": "1", "v": "a2"}, 1001),
        canal_message("items", "INSERT", {"id": "2", "v": "b"}, 1002),
    )
    # The engine's process exits after the tables are committed, before the checkpoint.
    died = run(engine_env, shop, CDC_INGEST_FAIL_AT="after_tables")
    assert died.returncode == 2
    assert died.stderr.strip().splitlines() == [
        f"cdc-ingest: error: the warm engine in {engine_env['CDC_INGEST_ENGINE_DIR']} stopped "
        "during the batch (its log: engine.log there); nothing it had not committed is applied, "
        "and a rerun resumes the batch"
    ]
    assert engine_status(engine_env).returncode == 3
    # No engine answers (its socket is left behind): the rerun runs cold and resumes the batch.
    rerun = summary(run(engine_env, shop))
    assert rerun["batch_id"] == 2
    assert shop.rows() == [(1, "a2"), (2, "b")]
    # A start replaces the dead engine (for the module's next tests).
    restarted = subprocess.run(
        [CLI, "engine", "start"], env=engine_env, capture_output=True, text=True
    )
    assert restarted.stdout.startswith("engine started in "), restarted.stderr
    assert batches_done(engine_env) == 0


def test_the_engine_holds_its_whole_heap_from_its_start(engine_env):
    # Left to G1, the heap it commits grows and shrinks with its sizing over the batches (and the
    # engine's resident size with it); fixed and touched at start, it is known then.
    status = engine_status(engine_env)
    assert status.returncode == 0, status.stdout
    resident = float(status.stdout.split(" MiB resident")[0].rsplit(" ", 1)[1])
    assert resident >= 2048, status.stdout


def test_a_start_finds_a_running_engine_and_a_killed_one_is_replaced(engine_env):
    status = engine_status(engine_env).stdout
    pid = int(status.split(": pid ")[1].split(",")[0])
    again = subprocess.run([CLI, "engine", "start"], env=engine_env, capture_output=True, text=True)
    assert again.stdout.strip() == (
        f"engine already running in {engine_env['CDC_INGEST_ENGINE_DIR']} (pid {pid})"
    )
    exited = os.pidfd_open(pid)  # readable once the process is gone (it is not our child)
    os.kill(pid, signal.SIGKILL)
    assert select.select([exited], [], [], 60)[0] == [exited]
    os.close(exited)
    replaced = subprocess.run(
        [CLI, "engine", "start"], env=engine_env, capture_output=True, text=True
    )
    assert replaced.stdout.startswith("engine started in "), replaced.stderr
    new_pid = int(replaced.stdout.split("(pid ")[1].split(")")[0])
    assert new_pid != pid


LINDORM_LINE = (
    '{"schema":{},"payload":{"op":"c","ts_ms":1465491411815,"before":null,'
    '"after":{"id":"1004","first_name":"Anne","last_name":"Kretchmar"},'
    '"source":{"version":"v1.0","db":"ld-xxxx","namespace":"default","table":"customers",'
    '"ts_ms":1465491411807}}}\n'
)


@pytest.mark.slow
def test_a_dag_run_sends_its_batch_to_the_engine(engine_env, tmp_path):
    from airflow_runner import airflow, airflow_env, migrate, require_stack, tail, task_states

    require_stack()
    landing = tmp_path / "landing"
    landing.mkdir()
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "catalog": {
                    "name": "lake",
                    "uri": f"sqlite:///{tmp_path}/catalog.db",
                    "warehouse": (tmp_path / "warehouse").as_uri(),
                },
                "pipelines": [
                    {
                        "name": "customers",
                        "format": "lindorm",
                        "landing": landing.as_uri(),
                        "namespace": "ods",
                        "retries": 0,
                        "keys": {"customers": ["id"]},
                    }
                ],
            }
        )
    )
    env = airflow_env(
        tmp_path / "airflow", config, CDC_INGEST_ENGINE_DIR=engine_env["CDC_INGEST_ENGINE_DIR"]
    )
    migrate(env, tmp_path)
    (landing / "customers-0001.json").write_text(LINDORM_LINE)
    before = batches_done(engine_env)
    done = airflow(["dags", "test", "ingest_customers"], env, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, tail(done)
    assert "ran on the warm engine" in output, tail(done)
    assert "ingest_job.py run --config" not in output, "the task spark-submitted the job"
    # The batch's summary reached the task's log.
    assert "customers (created): 1 messages -> inserted 1" in output, tail(done)
    assert batches_done(engine_env) == before + 1
    [states] = task_states(tmp_path / "airflow", "ingest_customers").values()
    assert states == {
        "check_landing": "success",
        "apply_batch": "success",
        "batch_summary": "success",
    }
    from pyiceberg.catalog.sql import SqlCatalog

    table = SqlCatalog(
        "lake", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=(tmp_path / "warehouse").as_uri()
    ).load_table("ods.customers")
    rows = table.scan(selected_fields=("id", "first_name", "last_name")).to_arrow().to_pylist()
    assert rows == [{"id": "1004", "first_name": "Anne", "last_name": "Kretchmar"}]


def test_the_engine_keeps_one_session_per_catalog_settings_and_at_most_sixteen(spark):
    from cdc_ingest.catalog.config import CatalogConfig
    from cdc_ingest.engine.server import SESSIONS_KEPT, Engine

    engine = Engine(spark, 2, lambda argv, cwd, sessions: 0)

    def catalog(number: int) -> CatalogConfig:
        return CatalogConfig(f"c{number}", f"sqlite:////tmp/c{number}.db", f"file:///tmp/c{number}")

    first = engine.session(catalog(0), "run", None)
    assert engine.session(catalog(0), "run", None) is first
    assert first.conf.get("spark.sql.catalog.c0") == "org.apache.iceberg.spark.SparkCatalog"
    # Another catalog's settings are not visible in this session, nor this one's in the engine's.
    assert first is not spark and spark.conf.get("spark.sql.catalog.c0", None) is None
    for number in range(1, SESSIONS_KEPT + 1):
        engine.session(catalog(number), "run", None)
    assert len(engine.sessions) == SESSIONS_KEPT == 16
    # The least recently used (catalog 0) was dropped: asking again makes a new session.
    assert engine.session(catalog(0), "run", None) is not first


def test_the_engine_interprets_a_tiny_batchs_expressions_in_a_session_of_its_own(spark):
    """A tiny batch's session interprets its expressions (a wide table's projections are
    generated anew by each task otherwise); a larger batch, or one of unknown size, of the
    same catalog has the engine's code generation, in another session."""
    from cdc_ingest.catalog.config import CatalogConfig
    from cdc_ingest.engine.server import Engine
    from cdc_ingest.spark_session import TINY_BATCH_BYTES

    engine = Engine(spark, 2, lambda argv, cwd, sessions: 0)
    catalog = CatalogConfig("tiny", "sqlite:////tmp/tiny.db", "file:///tmp/tiny")
    tiny = engine.session(catalog, "run", None, TINY_BATCH_BYTES)
    larger = engine.session(catalog, "run", None, TINY_BATCH_BYTES + 1)
    unknown = engine.session(catalog, "run", None)
    generated = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")
    assert tuple(tiny.conf.get(k) for k in generated) == ("false", "NO_CODEGEN")
    assert larger is unknown and larger is not tiny
    assert tuple(larger.conf.get(k) for k in generated) == ("true", "FALLBACK")
    assert engine.session(catalog, "run", None, 1) is tiny


def test_the_event_log_redacts_each_sessions_secrets_and_keeps_the_applications_own(spark):
    """Secret keys a session sets reach the application's SparkConf as a placeholder (the event
    log redacts only keys it holds); one the application started with keeps its value there,
    and sessions without their own value are not made to unset it."""
    from cdc_ingest.engine.server import Engine

    engine = Engine(spark, 2, lambda argv, cwd, sessions: 0)
    jvm_conf = spark.sparkContext._jsc.sc().conf()
    own = "spark.sql.catalog.redact_own.token"
    jvm_conf.set(own, "from-the-application")
    placed = "spark.sql.catalog.redact_placed.credential"
    plain = "spark.sql.catalog.redact_placed.uri"
    try:
        engine._redact_in_event_logs(
            {own: "a-session-token", placed: "client:a-secret", plain: "http://127.0.0.1:1"}
        )
        assert jvm_conf.get(own) == "from-the-application"
        assert jvm_conf.get(placed) == "set by each batch"
        assert not jvm_conf.contains(plain)
        assert engine.redacted == {placed}
    finally:
        for name in (own, placed):
            jvm_conf.remove(name)
