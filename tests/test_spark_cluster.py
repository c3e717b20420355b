"""The production path end to end: an Airflow DAG spark-submits the job to a Spark standalone
cluster, which reads an S3 landing zone and writes through Iceberg's REST catalog server into an
``s3://`` warehouse; every secret comes from an Airflow connection and none is ever printed.

All servers are real and on loopback: moto's S3, Apache Iceberg's REST catalog server, a Spark
master and worker from the pyspark distribution. The master's JSON API and the application's
event log show which JVM ran the tasks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import airflow_runner
import pytest
import yaml
from airflow_runner import airflow, airflow_env, migrate, require_stack, tail, task_states
from formats_under_test import FORMATS, TABLE, Changes
from lakehouses import S3_REGION, S3Server, rest_s3_catalog
from spark_cluster import SparkCluster, spark_cluster

pytestmark = pytest.mark.slow

DAG = "ingest_orders"
# Unique strings: if one of them shows up in any output, a secret leaked.
REST_SECRET = "rest-client-secret-5b1f0e"
WAREHOUSE_SECRET = "warehouse-secret-key-93ad7c"
LANDING_SECRET = "landing-secret-key-41c2e8"
SECRETS = (REST_SECRET, WAREHOUSE_SECRET, LANDING_SECRET)


def _aws_connection(s3: S3Server, key_id: str, secret: str) -> str:
    return json.dumps(
        {
            "conn_type": "aws",
            "login": key_id,
            "password": secret,
            "extra": {
                "endpoint_url": s3.endpoint,
                "region_name": S3_REGION,
                "config_kwargs": {"s3": {"addressing_style": "path"}},
            },
        }
    )


class Deployment:
    """The pipelines file, the Airflow environment and the servers of one test."""

    def __init__(self, root: Path, s3: S3Server, stack: ExitStack) -> None:
        self.root = root
        self.s3 = s3
        self.bucket = f"landing-{root.name.lower().replace('_', '-')}"[:60]
        s3.client().create_bucket(Bucket=self.bucket)
        self.catalog = rest_s3_catalog(root, "lake", s3, stack)
        self.catalog.update(conn_id="lake_catalog", aws_conn_id="lake_warehouse")
        self.home = root / "airflow"
        base_env = airflow_env(self.home, root / "pipelines.yaml")
        self.cluster: SparkCluster = stack.enter_context(spark_cluster(root / "spark", base_env))
        self.events = root / "events"
        self.events.mkdir()
        self.env = {
            **base_env,
            "AIRFLOW_CONN_SPARK_CLUSTER": json.dumps(
                {"conn_type": "spark", "host": "spark://127.0.0.1", "port": self.cluster.port}
            ),
            "AIRFLOW_CONN_LAKE_CATALOG": json.dumps(
                {"conn_type": "generic", "login": "cdc-ingest", "password": REST_SECRET}
            ),
            "AIRFLOW_CONN_LAKE_WAREHOUSE": _aws_connection(s3, "warehouse-key", WAREHOUSE_SECRET),
            "AIRFLOW_CONN_LANDING_S3": _aws_connection(s3, "landing-key", LANDING_SECRET),
        }
        self.write_config()
        migrate(self.env, root)

    def write_config(self, **catalog: Any) -> None:
        doc = {
            "catalog": {**self.catalog, **catalog},
            "spark": {
                "conn_id": "spark_cluster",
                "conf": {
                    "spark.executor.memory": "1g",
                    "spark.executor.cores": "1",
                    "spark.cores.max": "1",
                    "spark.eventLog.enabled": "true",
                    "spark.eventLog.dir": self.events.as_uri(),
                    # One plain JSON file per application on both lines (Spark 4 rolls and
                    # compresses event logs by default).
                    "spark.eventLog.rolling.enabled": "false",
                    "spark.eventLog.compress": "false",
                },
            },
            "pipelines": [
                {
                    "name": "orders",
                    "format": "debezium-json",
                    "landing": f"s3://{self.bucket}/orders",
                    "aws_conn_id": "landing_s3",
                    "namespace": "ods",
                    "retries": 0,
                    **FORMATS["debezium-json"]["options"],
                }
            ],
        }
        (self.root / "pipelines.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))

    def land(self, name: str, lines: list[str]) -> None:
        body = "".join(line + "\n" for line in lines).encode()
        self.s3.client().put_object(Bucket=self.bucket, Key=f"orders/{name}", Body=body)

    def dags_test(self) -> subprocess.CompletedProcess[str]:
        return airflow(["dags", "test", DAG], self.env, self.root)

    def read(self, table: str) -> list[dict[str, Any]]:
        """Rows of a table through pyiceberg, with the warehouse keys the connection holds."""
        from cdc_ingest.catalog.properties import env_name
        from cdc_ingest.config import load_config
        from cdc_ingest.state.lake import open_catalog

        catalog = load_config(self.root / "pipelines.yaml").catalog
        environ = {
            env_name("lake", "s3.access-key-id"): "warehouse-key",
            env_name("lake", "s3.secret-access-key"): WAREHOUSE_SECRET,
        }
        loaded = open_catalog(catalog, environ=environ).load_table(("ods", table))
        rows: list[dict[str, Any]] = loaded.scan().to_arrow().to_pylist()
        return rows

    def outputs(self) -> Iterator[tuple[str, str]]:
        """Every log the run wrote: Airflow's task logs, Spark's daemons, executors, events."""
        paths = [*self.home.rglob("*.log"), *self.cluster.root.rglob("*"), *self.events.rglob("*")]
        for path in paths:
            if path.is_file():
                yield str(path), path.read_text(errors="replace")


def _assert_no_secret(named_texts: Iterator[tuple[str, str]] | list[tuple[str, str]]) -> None:
    for name, text in named_texts:
        for secret in SECRETS:
            assert secret not in text, f"secret leaked into {name}"


def _events(events: Path, kind: str) -> list[dict[str, Any]]:
    """Every event of ``kind`` in the event logs of the applications that ran."""
    found = []
    for log in events.iterdir():
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event.get("Event") == kind:
                found.append(event)
    return found


def _task_ends(events: Path) -> list[dict[str, Any]]:
    return [e["Task Info"] for e in _events(events, "SparkListenerTaskEnd")]


ALICE = {"id": 1, "owner": "alice", "balance": 10}
BOB = {"id": 2, "owner": "bob", "balance": 20}


def test_ingest_dag_on_a_spark_cluster_reads_s3_and_writes_rest_catalog_over_s3(
    tmp_path: Path, s3_server: S3Server
) -> None:
    require_stack()
    with ExitStack() as stack:
        deploy = Deployment(tmp_path, s3_server, stack)
        deploy.cluster.start_worker()
        c = Changes("debezium-json")
        deploy.land(
            "001.json",
            [
                c.insert(ALICE, 1000),
                c.insert(BOB, 1001),
                c.update(ALICE, {**ALICE, "balance": 9}, 1002),
            ],
        )
        deploy.land("002.json", [c.delete(BOB, 1003)])

        run = deploy.dags_test()
        assert run.returncode == 0, tail(run)
        [states] = task_states(deploy.home, DAG).values()
        assert states == {
            "check_landing": "success",
            "apply_batch": "success",
            "batch_summary": "success",
        }, tail(run)

        rows = sorted((r["id"], r["owner"], r["balance"]) for r in deploy.read(TABLE))
        assert rows == [(1, "alice", 9)]
        # The data and metadata are objects on the S3 server, under the REST server's warehouse.
        keys = [
            o["Key"]
            for o in s3_server.client().list_objects_v2(Bucket="warehouse", Prefix=tmp_path.name)[
                "Contents"
            ]
        ]
        assert any(k.endswith(".parquet") and f"/ods/{TABLE}/data/" in k for k in keys)
        assert any(k.endswith(".metadata.json") and f"/ods/{TABLE}/metadata/" in k for k in keys)

        # The worker's executor did the work: the master ran the app on it, and every task ended
        # on an executor, none in the driver.
        apps = deploy.cluster.state()["completedapps"]
        [app] = [a for a in apps if a["name"] == "cdc-ingest-orders"]
        ends = _task_ends(deploy.events)
        assert ends and {t["Executor ID"] for t in ends} == {"0"}, ends[:3]
        assert [p for p in deploy.cluster.executor_logs() if app["id"] in str(p)]

        _assert_no_secret([("airflow stdout", run.stdout), ("airflow stderr", run.stderr)])
        # `dags test` prints the task logs, spark-submit's output among them; the scan below reaches
        # the executors' logs too.
        assert "ingest_job.py run --config" in run.stdout + run.stderr
        outputs = list(deploy.outputs())
        assert any(name.endswith("/stderr") and "Finished task" in text for name, text in outputs)
        _assert_no_secret(outputs)
        batches = deploy.read("_cdc_batches")
        _assert_no_secret([("_cdc_batches", json.dumps(batches, default=str))])


def test_a_worker_killed_mid_batch_and_the_rerun_converge_to_the_same_rows(
    tmp_path: Path, s3_server: S3Server
) -> None:
    require_stack()
    with ExitStack() as stack:
        deploy = Deployment(tmp_path, s3_server, stack)
        worker = deploy.cluster.start_worker()
        c = Changes("debezium-json")
        people: list[dict[str, Any]] = [
            {"id": i, "owner": f"o{i}", "balance": i} for i in range(1, 41)
        ]
        for n in range(4):
            batch = people[n * 10 : (n + 1) * 10]
            deploy.land(f"{n:03}.json", [c.insert(p, 1000 + p["id"]) for p in batch])
        deploy.land("004.json", [c.update(p, {**p, "balance": -p["id"]}, 2000) for p in people[:5]])
        deploy.land("005.json", [c.delete(p, 3000) for p in people[5:10]])

        first = subprocess.Popen(
            [str(Path(airflow_runner.VENV_BIN) / "airflow"), "dags", "test", DAG],
            env=deploy.env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        output: list[str] = []
        reader = threading.Thread(target=lambda: output.extend(first.stdout or []))
        reader.start()
        deploy.cluster.wait_for_finished_task(timeout=300)
        deploy.cluster.kill_worker(worker)
        # A replacement worker: the application gets a new executor (Spark's retry), or fails.
        deploy.cluster.start_worker()
        first.wait(timeout=600)
        reader.join()
        [first_states] = task_states(deploy.home, DAG).values()
        # The kill hit the application: its first executor was lost and a second one added.
        assert len(_events(deploy.events, "SparkListenerExecutorAdded")) >= 2

        if first_states["apply_batch"] != "success":
            rerun = deploy.dags_test()
            assert rerun.returncode == 0, tail(rerun)

        expected = sorted(
            [(p["id"], p["owner"], -p["id"]) for p in people[:5]]
            + [(p["id"], p["owner"], p["id"]) for p in people[10:]]
        )
        rows = sorted((r["id"], r["owner"], r["balance"]) for r in deploy.read(TABLE))
        assert rows == expected, "".join(output)[-4000:]
        # Every file applied by exactly one committed batch.
        checkpoints = deploy.read("_cdc_checkpoints")
        committed = {r["batch_id"] for r in checkpoints if r["status"] == "committed"}
        applied = sorted(
            r["file"].rsplit("/", 1)[-1]
            for r in checkpoints
            if r["status"] == "applied" and r["batch_id"] in committed
        )
        assert applied == [f"{n:03}.json" for n in range(6)]


def _process_tree_command_lines(pid: int) -> list[tuple[str, str]]:
    """The command line of ``pid`` and of its children (the engine and its driver JVM)."""
    found = []
    for each in [pid, *map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]:
        text = Path(f"/proc/{each}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        found.append((f"command line of pid {each}", text))
    return found


def test_dag_tasks_run_on_a_warm_engine_on_the_cluster_named_by_an_airflow_connection(
    tmp_path: Path, s3_server: S3Server
) -> None:
    """The production engine: a long-running application on the cluster (driver on the Airflow
    host, executors on the worker), found through its Airflow connection; the DAG's task sends
    its batch there instead of spark-submitting, and its secrets stay inside the request."""
    require_stack()
    with ExitStack() as stack:
        deploy = Deployment(tmp_path, s3_server, stack)
        deploy.cluster.start_worker()
        engine = tmp_path / "engine"
        cli = str(Path(sys.executable).parent / "cdc-ingest")
        # The engine's own environment holds none of the connections: no secret to leak.
        engine_env = {k: v for k, v in deploy.env.items() if not k.startswith("AIRFLOW_CONN_")} | {
            "CDC_INGEST_ENGINE_DIR": str(engine),
            "SPARK_DRIVER_MEMORY": "2g",  # held from its start: plenty for the test's batches
        }
        engine_env.pop("SPARK_SUBMIT_OPTS", None)
        config = str(tmp_path / "pipelines.yaml")
        command = [cli, "engine", "start", "--config", config, "--master", deploy.cluster.url]
        started = subprocess.run(command, env=engine_env, capture_output=True, text=True)
        assert started.returncode == 0, started.stderr
        stop = [cli, "engine", "stop"]
        stack.callback(subprocess.run, stop, env=engine_env, capture_output=True)
        # The tasks know the engine only through the connection.
        deploy.env.pop("CDC_INGEST_ENGINE_DIR", None)
        deploy.env["AIRFLOW_CONN_CDC_INGEST_ENGINE"] = json.dumps(
            {"conn_type": "generic", "extra": {"dir": str(engine)}}
        )
        c = Changes("debezium-json")
        deploy.land("001.json", [c.insert(ALICE, 1000), c.insert(BOB, 1001)])
        deploy.land("002.json", [c.update(ALICE, {**ALICE, "balance": 9}, 1002)])

        run = deploy.dags_test()
        assert run.returncode == 0, tail(run)
        assert "ran on the warm engine" in run.stdout + run.stderr
        assert "ingest_job.py run --config" not in run.stdout + run.stderr  # no spark-submit
        rows = sorted((r["id"], r["owner"], r["balance"]) for r in deploy.read(TABLE))
        assert rows == [(1, "alice", 9), (2, "bob", 20)]

        # One application on the cluster: the engine's, still running; no batch app of its own.
        state = deploy.cluster.state()
        assert [a["name"] for a in state["activeapps"]] == ["cdc-ingest-engine"]
        assert not [a for a in state["completedapps"] if a["name"] == "cdc-ingest-orders"]
        [app_id] = [a["id"] for a in state["activeapps"]]
        status = subprocess.run(
            [cli, "engine", "status"], env=engine_env, capture_output=True, text=True
        )
        assert f"on {deploy.cluster.url}" in status.stdout, status.stdout
        pid = int(status.stdout.split("pid ")[1].split(",")[0])
        command_lines = _process_tree_command_lines(pid)
        assert any("SparkSubmit" in text for _, text in command_lines), command_lines

        subprocess.run(stop, env=engine_env, capture_output=True, check=True)
        # Every task of the batch ran on the worker's executor, none in the driver.
        ends = _task_ends(deploy.events)
        assert ends and {t["Executor ID"] for t in ends} == {"0"}, ends[:3]
        assert [p for p in deploy.cluster.executor_logs() if app_id in str(p)]
        _assert_no_secret(
            [
                ("airflow stdout", run.stdout),
                ("airflow stderr", run.stderr),
                ("engine.log", (engine / "engine.log").read_text(errors="replace")),
                *command_lines,
                *deploy.outputs(),
            ]
        )
