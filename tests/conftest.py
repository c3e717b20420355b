"""Shared fixtures: one Spark session for the whole suite, a fresh catalog per test."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
# Peer projects' CDC test data with expected results (Apache-2.0, see its README.txt and LICENSEs).
CONFORMANCE = FIXTURES / "conformance"
sys.path.insert(0, str(Path(__file__).parent))

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("CDC_INGEST_SHUFFLE_PARTITIONS", "2")
os.environ.setdefault("SPARK_MASTER", "local[2]")
# Python workers inherit the environment the JVM started with: the loopback S3 test's
# credentials must be there before the session starts. (No test reaches real AWS.)
for _name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
    os.environ.setdefault(_name, "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
# The JVMs tests start (spark-submit, the CLI, Airflow tasks) each run one small batch and exit:
# HotSpot's optimizing compiler (C2) costs them more CPU than it saves (a chaos-test run, 55 CPU-s
# with it, 43 without; the suite is CPU-bound on 2 cores). The shared session below keeps C2: a
# long-lived JVM that runs hundreds of tests is slower without it (13.5 min against 19+ for
# test_scenarios and test_fresh_tables).
SUBMITTED_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_SUBMIT_OPTS", SUBMITTED_JVM_OPTIONS)
_catalogs = itertools.count()
# The DAG test modules' fixtures (AIRFLOW_HOME, clean environment, pipelines file).
pytest_plugins = ["dag_fixtures", "lakehouses"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with end-to-end (``slow``) tests first, each module's tests kept together and in
    order (module fixtures start once): pytest-xdist then hands out the long tests early, and
    the run ends on short ones instead of one worker finishing a long test alone."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one Spark session of the test run (Iceberg extensions on)."""
    from cdc_ingest.config import CatalogConfig
    from cdc_ingest.spark_session import build_session

    submit_options = os.environ.pop("SPARK_SUBMIT_OPTS", None)
    try:
        session = build_session(
            CatalogConfig(
                "bootstrap", "sqlite:////tmp/cdc-bootstrap.db", "file:///tmp/cdc-bootstrap"
            )
        )
    finally:
        if submit_options is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = submit_options
    yield session
    session.stop()


@dataclass
class Lake:
    """A catalog, a landing zone and a pipelines file of one test."""

    root: Path
    spark: Any
    catalog: str
    pipelines: list[dict[str, Any]] = field(default_factory=list)
    # The pipelines file's catalog section; None: a SQLite catalog file and a local warehouse.
    catalog_section: dict[str, Any] | None = None
    kind: str = "jdbc+file"
    # The write policy of this lake's runs (``apply/write_policy``); None: the defaults.
    writes: Any = None

    @property
    def config_path(self) -> Path:
        return self.root / "pipelines.yaml"

    def landing(self, pipeline: str) -> Path:
        path = self.root / "landing" / pipeline
        path.mkdir(parents=True, exist_ok=True)
        return path

    def add_pipeline(self, name: str, fmt: str, **options: Any) -> Path:
        """Declare a pipeline (namespace ``ods`` unless given); returns its landing directory."""
        landing = self.landing(name)
        spec = {
            "name": name,
            "format": fmt,
            "landing": landing.as_uri(),
            "namespace": "ods",
            **options,
        }
        self.pipelines = [p for p in self.pipelines if p["name"] != name] + [spec]
        self.write_config()
        return landing

    def write_config(self) -> None:
        import yaml

        doc = {
            "catalog": self.catalog_section
            or {
                "name": self.catalog,
                "uri": f"sqlite:///{self.root / 'catalog.db'}",
                "warehouse": (self.root / "warehouse").as_uri(),
            },
            "pipelines": self.pipelines,
        }
        self.config_path.write_text(yaml.safe_dump(doc, sort_keys=False))

    def land(self, pipeline: str, name: str, lines: list[Any] | str) -> Path:
        """Write a landed file; dicts and lists are written as one compact JSON line each."""
        path = self.landing(pipeline) / name
        if isinstance(lines, str):
            path.write_text(lines)
        else:
            path.write_text(
                "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
            )
        return path

    def run(self, pipeline: str, **options: Any) -> Any:
        """Run one micro-batch in-process on the shared session (``options``: RunOptions)."""
        from cdc_ingest.config import load_config
        from cdc_ingest.run.batch import run_pipeline
        from cdc_ingest.run.options import RunOptions

        config = load_config(self.config_path)
        summary = run_pipeline(self.spark, config, pipeline, RunOptions(**options), self.writes)
        # Every run of the suite checks that each record's fate is counted exactly once.
        assert summary.unaccounted() == [], summary.render()
        return summary

    def route_at(self, **sizes: int) -> None:
        """Take this lake's write routes at a test's sizes (``WritePolicy``'s fields), for the
        runs that follow: a table of two rows is then, say, merged rather than rewritten."""
        from cdc_ingest.apply.write_policy import WritePolicy

        self.writes = dataclasses.replace(self.writes or WritePolicy(), **sizes)

    def table(self, name: str, namespace: str = "ods") -> Any:
        from cdc_ingest.config import load_config
        from cdc_ingest.spark_session import configure_catalog

        # Runs in a subprocess leave this session without the test's catalog registered.
        configure_catalog(self.spark, load_config(self.config_path).catalog)
        identifier = f"{self.catalog}.{namespace}.`{name}`"
        self.spark.sql(f"REFRESH TABLE {identifier}")
        return self.spark.table(identifier)

    def rows(self, name: str, *columns: str, namespace: str = "ods") -> list[dict[str, Any]]:
        """Rows of a table as dicts without the ``_cdc_`` columns, sorted."""
        df = self.table(name, namespace)
        cols = list(columns) or [c for c in df.columns if not c.startswith("_cdc_")]
        quoted = ["`" + c.replace("`", "``") + "`" for c in cols]
        rows = [r.asDict() for r in df.select(*quoted).collect()]
        return sorted(rows, key=lambda r: json.dumps(list(r.values()), default=str))

    def snapshots(self, name: str, namespace: str = "ods") -> int:
        return self.spark.sql(f"SELECT * FROM {self.catalog}.{namespace}.{name}.snapshots").count()

    def snapshot_files(self, name: str) -> list[tuple[str, str, str, str]]:
        """Each snapshot's operation, batch, data files and delete files, oldest first."""
        rows = self.spark.sql(
            f"SELECT operation, summary FROM {self.catalog}.ods.{name}.snapshots "
            "ORDER BY committed_at"
        ).collect()
        return [
            (
                r["operation"],
                r["summary"].get("cdc.batch-id"),
                r["summary"].get("total-data-files"),
                r["summary"].get("total-delete-files"),
            )
            for r in rows
        ]

    def dead_letters(self, namespace: str = "ods") -> list[dict[str, Any]]:
        df = self.table("_cdc_dead_letters", namespace).orderBy("file", "line")
        return [r.asDict() for r in df.collect()]


@pytest.fixture
def lake(request: pytest.FixtureRequest, spark: Any, tmp_path: Path) -> Iterator[Lake]:
    """A fresh, empty lake with its own catalog name on the shared session.

    On a SQLite catalog file and a local warehouse, or, parametrized indirectly with
    ``lakehouses.REST_S3``, on a REST catalog server over an S3 warehouse (see lakehouses.py).
    """
    from lakehouses import JDBC_FILE, REST_S3, rest_s3_catalog

    kind = getattr(request, "param", JDBC_FILE)
    lake = Lake(root=tmp_path, spark=spark, catalog=f"lake{next(_catalogs)}", kind=kind)
    with contextlib.ExitStack() as stack:
        if kind == REST_S3:
            s3 = request.getfixturevalue("s3_server")
            lake.catalog_section = rest_s3_catalog(tmp_path, lake.catalog, s3, stack)
        yield lake


@pytest.fixture(scope="session")
def engine_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A warm engine of this test worker (``cdc-ingest engine``), started once, stopped at the
    end: the CLI runs and DAG tasks of the modules that use ``warm_engine`` go to it."""
    import subprocess

    place = tmp_path_factory.mktemp("engine")
    # It holds its whole heap from its start: 2g is plenty for the tests' batches.
    env = {**os.environ, "CDC_INGEST_ENGINE_DIR": str(place), "SPARK_DRIVER_MEMORY": "2g"}
    # A long-lived JVM: both compilers, as the shared session above.
    env.pop("SPARK_SUBMIT_OPTS", None)
    cli = str(Path(sys.executable).parent / "cdc-ingest")
    started = subprocess.run([cli, "engine", "start"], env=env, capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    yield place
    subprocess.run([cli, "engine", "stop"], env=env, capture_output=True, text=True)


@pytest.fixture
def warm_engine(engine_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Send this test's CLI runs and DAG tasks to the worker's warm engine."""
    monkeypatch.setenv("CDC_INGEST_ENGINE_DIR", str(engine_dir))
    return engine_dir


@pytest.fixture
def utc_session(spark: Any) -> Any:
    """The shared session, checked to read timestamps back in UTC (history tests)."""
    # The job's sessions are UTC (session_conf); the timestamps read back are compared as such.
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    return spark
