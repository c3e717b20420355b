"""``cdc-ingest maintain`` on tables built by real ingest runs: compaction, deletes applied,
snapshots expired, orphans removed, rows unchanged; and its exclusion with ingest runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from formats_under_test import FORMATS, TABLE, Changes
from lakehouses import REST_S3

CLI = str(Path(sys.executable).parent / "cdc-ingest")
EXPECTED = [
    {"id": 1, "balance": 40},
    {"id": 3, "balance": 3},
    {"id": 10, "balance": 10},
    {"id": 11, "balance": 11},
    {"id": 12, "balance": 12},
]


# The mirror sorted by its key: a small unsorted table's batches are rewritten whole by pyiceberg
# (copy-on-write), which leaves no delete file for maintenance to apply; a sorted one is merged.
MERGED = {"table_options": {"*": {"sort_by": ["id"]}}}


def _row(key: int, balance: int) -> dict[str, object]:
    return {"id": key, "owner": f"o{key}", "balance": balance}


def _ingest_four_batches(lake) -> Changes:
    """Four batches: inserts, then updates of id 1, a delete and an insert each."""
    c = Changes("arcion")
    lake.land("accounts", "000.json", [c.insert(_row(k, k), 1000 + k) for k in (1, 2, 3)])
    lake.run("accounts")
    for batch in (1, 2, 3):
        ts = 1000 * (batch + 1)
        changes = [
            c.update(_row(1, 10 * batch if batch > 1 else 1), _row(1, 10 * (batch + 1)), ts),
            c.insert(_row(9 + batch, 9 + batch), ts + 1),
        ]
        if batch == 2:
            changes.append(c.delete(_row(2, 2), ts + 2))
        lake.land("accounts", f"{batch:03}.json", changes)
        lake.run("accounts")
    return c


def _pyiceberg_table(lake, name: str):
    from cdc_ingest.config import load_config
    from cdc_ingest.state.lake import open_catalog

    return open_catalog(load_config(lake.config_path).catalog).load_table(f"ods.{name}")


def _files(table) -> tuple[int, int]:
    """Data files and distinct delete files a full scan reads (pyiceberg's own planning)."""
    tasks = list(table.scan().plan_files())
    deletes = {d.file_path for t in tasks for d in t.delete_files}
    return len(tasks), len(deletes)


def test_maintain_compacts_applies_deletes_expires_snapshots_and_removes_orphans(lake):
    from cdc_ingest.config import load_config
    from cdc_ingest.maintenance import maintain_pipeline

    lake.add_pipeline(
        "accounts",
        "arcion",
        maintenance={"retain_snapshots": 1, "orphan_older_than": "3d"},
        **FORMATS["arcion"]["options"],
        **MERGED,
    )
    changes = _ingest_four_batches(lake)
    mirror = _pyiceberg_table(lake, TABLE)
    data_before, deletes_before = _files(mirror)
    assert data_before >= 4 and deletes_before >= 2, (data_before, deletes_before)
    assert len(mirror.snapshots()) >= 4
    data_dir = lake.root / "warehouse" / "ods" / TABLE / "data"
    assert data_dir.is_dir()
    old_orphan, young_stray = data_dir / "orphan-old.parquet", data_dir / "in-flight.parquet"
    for path in (old_orphan, young_stray):
        path.write_bytes(b"left by a failed write")
    four_days_ago = time.time() - timedelta(days=4).total_seconds()
    os.utime(old_orphan, (four_days_ago, four_days_ago))

    summary = maintain_pipeline(lake.spark, load_config(lake.config_path), "accounts")

    maintained = {t.table: t for t in summary.tables}
    assert set(maintained) == {
        TABLE,
        "_cdc_batches",
        "_cdc_checkpoints",
        "_cdc_dead_letters",
        "_cdc_ddl_history",
    } | ({"_cdc_tombstones"} & set(maintained))
    mirror = _pyiceberg_table(lake, TABLE)
    assert _files(mirror) == (1, 0)
    assert len(mirror.snapshots()) == 1
    assert not old_orphan.exists() and young_stray.exists()
    assert maintained[TABLE].orphan_files_removed == 1
    assert maintained[TABLE].data_files == (data_before, 1)
    # Every position delete is applied (no scan reads one, above) and none is left in the
    # metadata (rewrite_position_delete_files ran).
    assert maintained[TABLE].delete_files == (deletes_before, 0)
    assert not [n for n in maintained[TABLE].notes if "skipped" in n]
    rows = mirror.scan(selected_fields=("id", "balance")).to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == EXPECTED
    assert sorted(lake.rows(TABLE, "id", "balance"), key=lambda r: r["id"]) == EXPECTED
    checkpoints = _pyiceberg_table(lake, "_cdc_checkpoints")
    assert len(checkpoints.snapshots()) == 1 and _files(checkpoints)[0] == 1

    # The checkpoints still say every file is applied, and ingest goes on where it was.
    from cdc_ingest_airflow.lake_state import pending

    assert not pending(load_config(lake.config_path), "accounts").any
    assert lake.run("accounts").batch_id is None
    lake.land("accounts", "004.json", [changes.update(_row(3, 3), _row(3, 33), 9000)])
    assert lake.run("accounts").batch_id == 5
    assert {"id": 3, "balance": 33} in lake.rows(TABLE, "id", "balance")


def test_a_duration_keeps_young_snapshots(lake):
    from cdc_ingest.config import load_config
    from cdc_ingest.maintenance import maintain_pipeline

    lake.add_pipeline("accounts", "arcion", **FORMATS["arcion"]["options"], **MERGED)
    _ingest_four_batches(lake)
    before = len(_pyiceberg_table(lake, TABLE).snapshots())
    summary = maintain_pipeline(lake.spark, load_config(lake.config_path), "accounts")
    mirror = _pyiceberg_table(lake, TABLE)
    # Default retain_snapshots 7d: nothing is old enough; the compaction adds snapshots.
    assert len(mirror.snapshots()) > before
    assert _files(mirror) == (1, 0)
    [result] = [t for t in summary.tables if t.table == TABLE]
    assert result.snapshots[0] == before


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=dict(os.environ))


@pytest.mark.slow
@pytest.mark.usefixtures("warm_engine")  # its runs go to the worker's engine
def test_maintain_drops_the_tombstones_older_than_the_retention(lake):
    from canal_messages import row_message
    from cdc_ingest.config import load_config
    from cdc_ingest.maintenance import maintain_pipeline

    lake.add_pipeline("shop", "canal-json", maintenance={"tombstone_retention": "1d"})
    lake.add_pipeline("backfill", "canal-json")  # writes the table `shared` as well
    inserts = [row_message("items", "INSERT", {"id": k, "v": "a"}, 10 + k) for k in (1, 2, 3)]
    lake.land("shop", "000.json", [*inserts, row_message("shared", "INSERT", {"id": 1}, 10)])
    lake.run("shop")
    deletes = [
        row_message("items", "DELETE", {"id": 2, "v": "a"}, 20),
        row_message("shared", "DELETE", {"id": 1, "v": None}, 20),
    ]
    lake.land("shop", "001.json", deletes)
    lake.run("shop")
    lake.land("shop", "002.json", [row_message("items", "DELETE", {"id": 3, "v": "a"}, 30)])
    lake.run("shop")
    lake.land("backfill", "000.json", [row_message("shared", "INSERT", {"id": 5, "v": "b"}, 5)])
    lake.run("backfill")
    finished = {
        r["batch_id"]: r["finished_at"]
        for r in lake.rows("_cdc_batches", "pipeline", "batch_id", "finished_at")
        if r["pipeline"] == "shop"
    }
    # A day after batch 2 finished, and before a day after batch 3 did.
    now = finished[2] + timedelta(days=1) + (finished[3] - finished[2]) / 2

    summary = maintain_pipeline(lake.spark, load_config(lake.config_path), "shop", now=now)

    assert summary.tombstones_expired == 1
    assert "tombstones older than 1d dropped: 1" in summary.render()
    assert lake.rows("_cdc_tombstones", "target_table", "key") == [
        {"target_table": "items", "key": '["3"]'},
        {"target_table": "shared", "key": '["1"]'},
    ]
    # A late insert older than its key's delete: applied once the tombstone is gone, skipped
    # while it stays.
    late = [
        row_message("items", "INSERT", {"id": 2, "v": "late"}, 15),
        row_message("items", "INSERT", {"id": 3, "v": "late"}, 25),
    ]
    lake.land("shop", "003.json", late)
    counts = lake.run("shop").tables["items"]
    assert (counts.inserted, counts.older) == (1, 1)
    assert lake.rows("items") == [{"id": 1, "v": "a"}, {"id": 2, "v": "late"}]


def test_ingest_and_maintenance_of_a_namespace_exclude_each_other(lake):
    """Real processes: an ingest run cannot start while maintenance holds the namespace, and
    maintenance cannot start while an ingest run does; both say who holds it."""
    from cdc_ingest.config import load_config
    from cdc_ingest.state.locks import namespace_lock

    lake.add_pipeline(
        "accounts", "arcion", maintenance={"lock_wait": "2s"}, **FORMATS["arcion"]["options"]
    )
    c = Changes("arcion")
    lake.land("accounts", "000.json", [c.insert(_row(1, 1), 1000)])
    config = load_config(lake.config_path)
    flags = ("--config", str(lake.config_path), "--pipeline", "accounts")

    with namespace_lock(
        config.catalog, "ods", exclusive=True, wait=timedelta(seconds=1), purpose="maintenance"
    ):
        refused = _cli("run", *flags)
    assert refused.returncode == 2, refused.stderr[-3000:]
    [message] = [line for line in refused.stderr.splitlines() if "cdc-ingest: error" in line]
    assert message.startswith(
        f"cdc-ingest: error: pipeline accounts: namespace {lake.catalog}.ods is locked by "
        f"maintenance (pid {os.getpid()} on "
    ), message
    assert message.endswith(
        "; ingest gave up waiting after 2 s (ingest and maintenance of a namespace never overlap)"
    ), message
    # Nothing was applied while the namespace was held.
    assert not (lake.root / "warehouse" / "ods" / TABLE).exists()

    with namespace_lock(
        config.catalog, "ods", exclusive=False, wait=timedelta(seconds=1), purpose="ingest"
    ):
        # Another ingest run of the namespace is not held up by a running one.
        ran = _cli("run", *flags)
        assert ran.returncode == 0, ran.stderr[-3000:]
        waited = _cli("maintain", *flags)
    assert waited.returncode == 2, waited.stderr[-3000:]
    assert (
        f"cdc-ingest: error: pipeline accounts: namespace {lake.catalog}.ods is locked by ingest "
        "runs; maintenance gave up waiting after 2 s"
    ) in waited.stderr
    # Read with pyiceberg: this session's JDBC catalog on the file would hold SQLite locks that
    # the maintenance process then waits on.
    rows = _pyiceberg_table(lake, TABLE).scan(selected_fields=("id", "balance")).to_arrow()
    assert rows.to_pylist() == [{"id": 1, "balance": 1}]

    # Released: maintenance runs.
    done = _cli("maintain", *flags, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pipeline accounts: maintained" in done.stdout


def _accounts_pipeline(
    tmp_path: Path, maintenance: dict[str, object]
) -> tuple[Path, Path, tuple[str, str]]:
    """A pipelines file of one merged Arcion pipeline ``accounts`` on a SQLite catalog with
    ``maintenance``: its landing directory, the file, and the catalog's URI and warehouse."""
    import yaml

    landing = tmp_path / "landing"
    landing.mkdir()
    catalog_uri, warehouse = f"sqlite:///{tmp_path}/catalog.db", f"file://{tmp_path}/warehouse"
    config = tmp_path / "pipelines.yaml"
    pipeline = {
        "name": "accounts",
        "format": "arcion",
        "landing": landing.as_uri(),
        "namespace": "ods",
        "retries": 0,
        "maintenance": maintenance,
        **FORMATS["arcion"]["options"],
        **MERGED,
    }
    catalog = {"name": "lake", "uri": catalog_uri, "warehouse": warehouse}
    config.write_text(yaml.safe_dump({"catalog": catalog, "pipelines": [pipeline]}))
    return landing, config, (catalog_uri, warehouse)


@pytest.mark.slow
def test_maintain_dag_spark_submits_the_maintenance_job(tmp_path: Path, engine_dir: Path) -> None:
    """`airflow dags test maintain_<name>` after two ingest runs: one data file, no deletes.

    The ingest runs go to the worker's warm engine (the ingest DAG's spark-submit has tests of
    its own); the maintenance DAG finds no engine and spark-submits."""
    from airflow_runner import airflow, airflow_env, migrate, require_stack, tail, task_states
    from pyiceberg.catalog.sql import SqlCatalog

    require_stack()
    landing, config, (catalog_uri, warehouse) = _accounts_pipeline(
        tmp_path, {"retain_snapshots": 1}
    )
    home = tmp_path / "airflow"
    env = airflow_env(home, config)
    migrate(env, tmp_path)
    c = Changes("arcion")
    batches = [
        [c.insert(_row(1, 1), 1000), c.insert(_row(2, 2), 1001)],
        [c.update(_row(1, 1), _row(1, 10), 2000), c.delete(_row(2, 2), 2001)],
    ]
    for number, lines in enumerate(batches):
        (landing / f"{number:03}.json").write_text(
            "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
        )
        run = subprocess.run(
            [CLI, "run", "--config", str(config), "--pipeline", "accounts"],
            env={**env, "CDC_INGEST_ENGINE_DIR": str(engine_dir)},
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stderr
    assert "CDC_INGEST_ENGINE_DIR" not in env
    table = SqlCatalog("lake", uri=catalog_uri, warehouse=warehouse).load_table(f"ods.{TABLE}")
    assert _files(table) == (2, 1)

    maintained = airflow(["dags", "test", "maintain_accounts"], env, tmp_path)
    output = maintained.stdout + maintained.stderr
    assert "ingest_job.py maintain --config" in output, tail(maintained)
    assert f"{TABLE}: data files 2 -> 1, delete files 1 -> " in output, tail(maintained)
    [states] = task_states(home, "maintain_accounts").values()
    assert states == {"maintain_tables": "success"}
    table = SqlCatalog("lake", uri=catalog_uri, warehouse=warehouse).load_table(f"ods.{TABLE}")
    assert _files(table) == (1, 0) and len(table.snapshots()) == 1
    rows = table.scan(selected_fields=("id", "balance")).to_arrow().to_pylist()
    assert rows == [{"id": 1, "balance": 10}]


def _backdate_object(bucket: str, key: str, age: timedelta) -> None:
    """Age an object on the test's S3 server, which runs in this process (moto); S3's API has
    no way to set an object's LastModified."""
    from datetime import UTC, datetime

    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    stored = s3_backends[DEFAULT_ACCOUNT_ID]["global"].buckets[bucket].keys[key]
    stored.last_modified = datetime.now(UTC).replace(tzinfo=None) - age


@pytest.mark.parametrize("lake", [REST_S3], indirect=True)
def test_maintain_on_a_rest_catalog_over_s3_compacts_and_removes_orphan_objects(lake, s3_server):
    from cdc_ingest.config import load_config
    from cdc_ingest.maintenance import maintain_pipeline

    lake.add_pipeline(
        "accounts",
        "arcion",
        maintenance={"retain_snapshots": 1, "orphan_older_than": "3d"},
        **FORMATS["arcion"]["options"],
        **MERGED,
    )
    _ingest_four_batches(lake)
    mirror = _pyiceberg_table(lake, TABLE)
    data_before, deletes_before = _files(mirror)
    assert data_before >= 4 and deletes_before >= 2, (data_before, deletes_before)
    bucket, prefix = mirror.location().removeprefix("s3://").split("/", 1)
    orphan, young = f"{prefix}/data/orphan-old.parquet", f"{prefix}/data/in-flight.parquet"
    s3 = s3_server.client()
    for key in (orphan, young):
        s3.put_object(Bucket=bucket, Key=key, Body=b"left by a failed write")
    _backdate_object(bucket, orphan, timedelta(days=4))

    summary = maintain_pipeline(lake.spark, load_config(lake.config_path), "accounts")

    maintained = {t.table: t for t in summary.tables}
    assert maintained[TABLE].orphan_files_removed == 1
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    assert orphan not in keys and young in keys
    mirror = _pyiceberg_table(lake, TABLE)
    assert _files(mirror) == (1, 0) and len(mirror.snapshots()) == 1
    rows = mirror.scan(selected_fields=("id", "balance")).to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == EXPECTED


def _maintenance_events(airflow_home: Path, pipeline: str) -> list[dict[str, object]]:
    import sqlite3

    with sqlite3.connect(airflow_home / "airflow.db") as db:
        rows = db.execute(
            "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE a.name = ? ORDER BY e.id",
            (f"cdc_ingest.maintenance_due.{pipeline}",),
        ).fetchall()
    return [json.loads(r[0]) for r in rows]


def _queued_runs(airflow_home: Path) -> list[str]:
    """The DAGs an asset event queued a run of (what the scheduler starts next)."""
    import sqlite3

    with sqlite3.connect(airflow_home / "airflow.db") as db:
        rows = db.execute("SELECT target_dag_id FROM asset_dag_run_queue").fetchall()
    return sorted(r[0] for r in rows)


@pytest.mark.slow
@pytest.mark.usefixtures("warm_engine")
def test_a_batch_that_leaves_a_table_due_queues_its_maintenance(tmp_path: Path) -> None:
    """``maintenance.triggers.commits: 2``, through ``airflow dags test``: the create is one
    commit of a small file, the MERGE of the second batch another (its delete file): only the
    second batch's ``apply_batch`` emits the maintenance asset's event, which queues a run of
    ``maintain_accounts``; after maintenance the next MERGE is one commit again, not due."""
    from airflow_runner import airflow, airflow_env, migrate, require_stack, tail, task_states

    require_stack()
    landing, config, _ = _accounts_pipeline(
        tmp_path, {"schedule": None, "triggers": {"commits": 2}}
    )
    home = tmp_path / "airflow"
    env = airflow_env(home, config)
    migrate(env, tmp_path)
    # The maintenance DAG must be known, and unpaused, when the event arrives.
    assert (done := airflow(["dags", "reserialize"], env, tmp_path)).returncode == 0, tail(done)
    done = airflow(["dags", "unpause", "maintain_accounts"], env, tmp_path)
    assert done.returncode == 0, tail(done)
    c = Changes("arcion")
    batches = [
        [c.insert(_row(1, 1), 1000), c.insert(_row(2, 2), 1001)],
        [c.update(_row(1, 1), _row(1, 10), 2000)],
        [c.update(_row(1, 10), _row(1, 20), 3000)],
    ]

    def ingest(number: int) -> None:
        (landing / f"{number:03}.json").write_text(
            "\n".join(x if isinstance(x, str) else json.dumps(x) for x in batches[number])
        )
        done = airflow(["dags", "test", "ingest_accounts"], env, tmp_path)
        assert done.returncode == 0, tail(done)

    ingest(0)
    assert _maintenance_events(home, "accounts") == []
    assert _queued_runs(home) == []
    ingest(1)
    why = "2 commits of small or delete files since its last maintenance (trigger: 2)"
    assert _maintenance_events(home, "accounts") == [{"pipeline": "accounts", "due": {TABLE: why}}]
    assert _queued_runs(home) == ["maintain_accounts"]

    maintained = airflow(["dags", "test", "maintain_accounts"], env, tmp_path)
    assert maintained.returncode == 0, tail(maintained)
    assert {"maintain_tables": "success"} in task_states(home, "maintain_accounts").values()
    ingest(2)
    assert len(_maintenance_events(home, "accounts")) == 1
