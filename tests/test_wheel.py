"""The wheel is the product (issue 66): built from the sources and installed in a new virtualenv
that cannot see the checkout, it sets up its JVM side, runs a batch, and runs a DAG task from the
two-line DAG file the README shows.

The new environment takes the wheel's dependencies (pyspark, Airflow, pyiceberg...) from this
one's site-packages through a ``.pth`` line, which adds the directory without running its own
``.pth`` files: the editable install of this checkout stays out of sight, and every module of
``cdc_ingest`` comes from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from airflow_runner import airflow_env, java_home, migrate, tail

REPO = Path(__file__).resolve().parent.parent
TWO_LINE_DAG_FILE = (
    "import os\n"
    "from cdc_ingest_airflow.dag_factory import build_dags; "
    'globals().update(build_dags(os.environ["CDC_INGEST_CONFIG"]))\n'
)

pytestmark = pytest.mark.slow


@dataclass
class Installed:
    root: Path
    venv: Path

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    @property
    def cli(self) -> str:
        return str(self.venv / "bin" / "cdc-ingest")

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        # Python workers and spark-submit's driver run the new environment's interpreter.
        env["PYSPARK_PYTHON"] = self.python
        # spark-submit comes with pyspark, whose scripts are this environment's.
        scripts = [str(self.venv / "bin"), str(Path(sys.executable).parent), env.get("PATH", "")]
        env["PATH"] = os.pathsep.join(scripts)
        home = java_home()
        if home:
            env["JAVA_HOME"] = home
        return {**env, **extra}

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args),
            env=self.env(**extra),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    import pyspark

    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    ignored = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("jobs", "plugins"):
        shutil.copytree(REPO / name, source / name, ignore=ignored)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps",
         "-w", str(root / "dist"), str(source)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (root / "dist").glob("cdc_ingest-*.whl")
    shutil.rmtree(source)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = (venv / "lib").glob("python3.*/site-packages")
    (site / "dependencies.pth").write_text(str(Path(pyspark.__file__).parent.parent) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--no-deps", "--quiet", str(wheel)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return Installed(root, venv)


def _debezium_landing(root: Path, name: str) -> tuple[Path, Path]:
    """A pipelines file with one Debezium pipeline, and its landing zone with one batch."""
    landing = root / "landing" / name
    landing.mkdir(parents=True)
    lines = [
        {"before": None, "after": {"id": 1, "name": "ann"}, "op": "c", "ts_ms": 1,
         "source": {"db": "shop", "table": "customers", "ts_ms": 1, "pos": 1}},
        {"before": None, "after": {"id": 2, "name": "bob"}, "op": "c", "ts_ms": 2,
         "source": {"db": "shop", "table": "customers", "ts_ms": 2, "pos": 2}},
        {"before": {"id": 1, "name": "ann"}, "after": {"id": 1, "name": "anne"}, "op": "u",
         "ts_ms": 3, "source": {"db": "shop", "table": "customers", "ts_ms": 3, "pos": 3}},
    ]  # fmt: skip
    (landing / "000.json").write_text("".join(json.dumps(x) + "\n" for x in lines))
    config = root / f"{name}.yaml"
    config.write_text(
        f"catalog: {{name: lake, uri: 'sqlite:///{root}/{name}.db', "
        f"warehouse: '{(root / name).as_uri()}'}}\n"
        f"pipelines:\n  - {{name: {name}, format: debezium-json, landing: '{landing.as_uri()}',"
        " namespace: ods, keys: {customers: [id]}}\n"
    )
    return config, landing


def _rows(root: Path, name: str) -> list[dict[str, object]]:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("lake", uri=f"sqlite:///{root}/{name}.db", warehouse=str(root / name))
    table = catalog.load_table("ods.customers")
    rows = table.scan(selected_fields=("id", "name")).to_arrow().to_pylist()
    return sorted(rows, key=lambda r: str(r["id"]))


def test_the_wheel_holds_everything_a_deployment_runs(installed):
    where = installed.run(
        installed.python,
        "-c",
        "import cdc_ingest, cdc_ingest_airflow.dag_factory as f; "
        "print(cdc_ingest.__file__); print(f.application_path())",
    )
    assert where.returncode == 0, where.stderr
    package, application = where.stdout.split()
    assert package.startswith(str(installed.venv)), package
    assert application.startswith(str(installed.venv)), application
    assert application.endswith("cdc_ingest/application/ingest_job.py")


def test_setup_then_a_cold_run_from_the_wheel(installed):
    from cdc_ingest.jars import jars_dir

    config, _ = _debezium_landing(installed.root, "cold")
    run = [installed.cli, "run", "--config", str(config), "--pipeline", "cold", "--cold"]

    missing = installed.run(installed.cli, "setup", "--check")
    assert missing.returncode == 1
    assert "missing JVM artifact org.apache.iceberg:iceberg-spark-runtime" in missing.stdout
    # Before setup, a run stops before Spark starts, in one line that says what to do.
    refused = installed.run(*run)
    assert refused.returncode == 2, tail(refused)
    [line] = refused.stderr.strip().splitlines()
    assert "JVM artifacts missing" in line and "cdc-ingest setup" in line, line

    # An image built without network copies the artifacts it was given.
    setup = installed.run(installed.cli, "setup", "--jars-dir", str(jars_dir()))
    assert setup.returncode == 0, tail(setup)
    assert "copied org.apache.iceberg:iceberg-spark-runtime" in setup.stdout
    assert "wrote the driver's class archive" in setup.stdout
    checked = installed.run(installed.cli, "setup", "--check")
    assert checked.returncode == 0, tail(checked)
    again = installed.run(installed.cli, "setup", "--jars-dir", str(jars_dir()))
    assert again.returncode == 0 and "nothing to do" in again.stdout, tail(again)

    applied = installed.run(*run)

    assert applied.returncode == 0, tail(applied)
    assert _rows(installed.root, "cold") == [{"id": 1, "name": "anne"}, {"id": 2, "name": "bob"}]


def test_pip_installs_the_wheel_with_its_spark_lines_extra_and_constraints(installed):
    """As a team installs it: the wheel with the extra of a Spark line and that line's tested
    pins, resolved by pip (from the package index or its cache) into a virtualenv of its own."""
    import pyspark
    from cdc_ingest.jars import jars_dir
    from cdc_ingest.jvm_archive import archive_path
    from docker_files import constraint_pins

    line = ".".join(pyspark.__version__.split(".")[:2])
    constraints = REPO / "constraints" / f"py3.11-spark{line}-airflow3.3.txt"
    pins = constraint_pins(constraints)
    [wheel] = (installed.root / "dist").glob("cdc_ingest-*.whl")
    venv = installed.root / f"pip-{line}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    shutil.copy2(constraints, installed.root / constraints.name)

    done = installed.run(
        python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        f"{wheel}[spark{line.replace('.', '')}]", "-c", str(installed.root / constraints.name),
    )  # fmt: skip

    assert done.returncode == 0, tail(done)
    versions = installed.run(
        python, "-c", "import airflow, pyspark; print(pyspark.__version__, airflow.__version__)"
    )
    assert versions.stdout.split() == [pins["pyspark"], pins["apache-airflow"]], tail(versions)
    assert pins["pyspark"].startswith(f"{line}.")
    consistent = installed.run(python, "-m", "pip", "check", "--disable-pip-version-check")
    assert consistent.returncode == 0, tail(consistent)
    checked = installed.run(
        str(venv / "bin" / "cdc-ingest"), "setup", "--check",
        CDC_INGEST_JARS_DIR=str(jars_dir()), CDC_INGEST_JVM_ARCHIVE=str(archive_path()),
    )  # fmt: skip
    assert checked.returncode == 0, tail(checked)


def test_the_two_line_dag_file_runs_a_batch_from_the_wheel(installed):
    from cdc_ingest.jars import jars_dir

    setup = installed.run(installed.cli, "setup", "--jars-dir", str(jars_dir()))
    assert setup.returncode == 0, tail(setup)
    config, _ = _debezium_landing(installed.root, "dag")
    dags = installed.root / "dags"
    dags.mkdir()
    (dags / "cdc_ingest.py").write_text(TWO_LINE_DAG_FILE)
    home = installed.root / "airflow"
    # A database of its own, migrated by the Airflow the wheel's environment runs, not a copy
    # of one another module's test migrated.
    database = f"sqlite:///{home}/airflow.db"
    env = airflow_env(
        home, config, AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=database,
    )  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    migrate(env, installed.root)
    env = {**env, **installed.env()}

    done = subprocess.run(
        [installed.python, "-m", "airflow", "dags", "test", "ingest_dag"],
        env=env, cwd=installed.root, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip

    output = done.stdout + done.stderr
    assert done.returncode == 0, tail(done)
    finished = [line for line in output.splitlines() if "DagRun Finished" in line]
    assert finished and "state=success" in finished[-1], tail(done)
    assert f"{installed.venv}/lib" in output and "ingest_job.py run --config" in output
    assert _rows(installed.root, "dag") == [{"id": 1, "name": "anne"}, {"id": 2, "name": "bob"}]


# What a cluster worker's Python holds: pyarrow and pandas (and what pandas needs), nothing else.
WORKER_PACKAGES = (
    "pyarrow",
    "pandas",
    "numpy",
    "numpy.libs",
    "dateutil",
    "pytz",
    "tzdata",
    "six.py",
)


def _worker_python(root: Path) -> str:
    """A virtualenv of only pyarrow and pandas, linked from this environment's site-packages."""
    import pyspark

    site_packages = Path(pyspark.__file__).parent.parent
    packages = root / "worker-packages"
    packages.mkdir()
    for name in WORKER_PACKAGES:
        if (site_packages / name).exists():
            (packages / name).symlink_to(site_packages / name)
    venv = root / "worker-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = (venv / "lib").glob("python3.*/site-packages")
    (site / "packages.pth").write_text(f"{packages}\n")
    return str(venv / "bin" / "python")


def test_a_cluster_whose_workers_have_only_pyarrow_and_pandas_runs_the_dag(installed):
    """Issue 66, 5: the driver ships the package to the executors (addPyFile); the workers'
    Python, named as Spark names it in the pipelines file, holds nothing of ours."""
    from cdc_ingest.jars import jars_dir
    from spark_cluster import spark_cluster

    setup = installed.run(installed.cli, "setup", "--jars-dir", str(jars_dir()))
    assert setup.returncode == 0, tail(setup)
    root = installed.root / "cluster-run"
    root.mkdir()
    worker_python = _worker_python(root)
    bare = installed.run(worker_python, "-c", "import pandas, pyarrow; import cdc_ingest")
    assert "No module named 'cdc_ingest'" in bare.stderr, bare.stderr
    landing = root / "landing"
    landing.mkdir()
    # Five files of about 1 MB: more than the driver reads itself, so Python workers read them.
    filler = "x" * 1000
    for n in range(5):
        lines = [
            json.dumps({"before": None, "after": {"id": n * 1000 + i, "doc": filler}, "op": "c",
                        "source": {"db": "shop", "table": "docs", "ts_ms": 1, "pos": i},
                        "ts_ms": 1})
            for i in range(900)
        ]  # fmt: skip
        (landing / f"{n:03}.json").write_text("\n".join(lines) + "\n")
    config = root / "pipelines.yaml"
    config.write_text(
        f"catalog: {{name: lake, uri: 'sqlite:///{root}/catalog.db', "
        f"warehouse: '{(root / 'warehouse').as_uri()}'}}\n"
        "spark:\n  conn_id: spark_cluster\n  conf:\n"
        f"    spark.pyspark.python: {worker_python}\n"
        "    spark.executor.memory: 1g\n    spark.cores.max: '1'\n"
        f"pipelines:\n  - {{name: docs, format: debezium-json, landing: '{landing.as_uri()}',"
        " namespace: ods, keys: {docs: [id]}}\n"
    )
    dags = root / "dags"
    dags.mkdir()
    (dags / "cdc_ingest.py").write_text(TWO_LINE_DAG_FILE)
    home = root / "airflow"
    # A database of its own (as the two-line DAG test's): a copy of the worker's migrated
    # template was refused as needing a migration on the lowest Airflow of the 4.1 lane.
    env = airflow_env(
        home, config, AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
    )  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    migrate(env, root)
    with spark_cluster(root / "spark", installed.env()) as cluster:
        cluster.start_worker()
        connection = {"conn_type": "spark", "host": "spark://127.0.0.1", "port": cluster.port,
                      "extra": {"deploy-mode": "client"}}  # fmt: skip
        env = {**env, **installed.env(AIRFLOW_CONN_SPARK_CLUSTER=json.dumps(connection))}

        done = subprocess.run(
            [installed.python, "-m", "airflow", "dags", "test", "ingest_docs"],
            env=env, cwd=root, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip

        assert done.returncode == 0, tail(done)
        apps = cluster.state()["completedapps"]
        assert [a for a in apps if a["name"] == "cdc-ingest-docs"], apps
        logs = [p.read_text(errors="replace") for p in cluster.executor_logs()]
        assert any("Finished task" in text for text in logs), "no task ran on an executor"
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("lake", uri=f"sqlite:///{root}/catalog.db", warehouse=str(root))
    ids = catalog.load_table("ods.docs").scan(selected_fields=("id",)).to_arrow()["id"]
    assert sorted(ids.to_pylist()) == [n * 1000 + i for n in range(5) for i in range(900)]
