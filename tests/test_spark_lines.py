"""The job's JVM artifacts follow the installed Spark line (issue 66): Iceberg 1.12.0 has Spark
runtimes for 3.5 (Scala 2.12) and 4.1 (Scala 2.13) only, so any other line is refused before
Spark starts, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = str(Path(sys.executable).parent / "cdc-ingest")


def test_each_supported_line_takes_its_own_runtime_and_scala_artifacts():
    from cdc_ingest.jars import job_artifacts, optional_artifacts, spark_line

    assert (spark_line("3.5.9"), spark_line("4.1.1")) == ("3.5", "4.1")
    assert [a.coordinates for a in job_artifacts("3.5.9")] == [
        "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.12.0",
        "org.apache.iceberg:iceberg-aws-bundle:1.12.0",
        "org.xerial:sqlite-jdbc:3.51.1.0",
        "org.postgresql:postgresql:42.7.14",
        "org.apache.spark:spark-avro_2.12:3.5.9",
    ]
    assert [a.coordinates for a in job_artifacts("4.1.1")] == [
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
        "org.apache.iceberg:iceberg-aws-bundle:1.12.0",
        "org.xerial:sqlite-jdbc:3.51.1.0",
        "org.postgresql:postgresql:42.7.14",
        "org.apache.spark:spark-avro_2.13:4.1.1",
    ]
    assert [a.coordinates for a in optional_artifacts("4.1.1")] == [
        "io.openlineage:openlineage-spark_2.13:1.37.0"
    ]


def test_the_installed_pyspark_is_read_without_importing_it():
    import pyspark
    from cdc_ingest.jars import installed_spark

    assert installed_spark() == pyspark.__version__


@pytest.mark.parametrize("version", ["3.4.4", "4.0.1", "4.2.0"])
def test_a_run_on_a_spark_line_without_a_runtime_is_refused_before_spark_starts(tmp_path, version):
    fake = tmp_path / "fake" / "pyspark"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('this pyspark is only a version')\n")
    (fake / "version.py").write_text(f'__version__: str = "{version}"\n')
    config = tmp_path / "pipelines.yaml"
    config.write_text(
        f"catalog: {{name: lake, uri: 'sqlite:///{tmp_path}/c.db', "
        f"warehouse: '{tmp_path.as_uri()}/w'}}\n"
        f"pipelines:\n  - {{name: p, format: canal-json, landing: '{tmp_path.as_uri()}',"
        " namespace: ods}\n"
    )
    (tmp_path / "000.json").write_text("{}\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "fake")}

    done = subprocess.run(
        [CLI, "run", "--config", str(config), "--pipeline", "p", "--cold"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    line = ".".join(version.split(".")[:2])
    assert done.stderr.strip().splitlines() == [
        f"cdc-ingest: error: pipeline p: pyspark {version} is Spark {line}, which cdc-ingest "
        "does not support: install Spark 3.5 or 4.1 (Iceberg 1.12.0 has Spark runtimes for "
        "those only)"
    ]
    check = subprocess.run(
        [CLI, "setup", "--check"], env=env, capture_output=True, text=True, check=False
    )
    assert check.returncode == 2 and "does not support" in check.stderr, check.stderr


def test_a_pyspark_client_of_another_version_over_pyspark_is_refused(tmp_path):
    import pyspark

    # What a plain install beside the Spark provider 6 can leave: its pyspark-client resolved
    # to a newer Spark than pyspark.
    info = tmp_path / "site" / "pyspark_client-4.2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pyspark-client\nVersion: 4.2.0\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}

    check = subprocess.run(
        [CLI, "setup", "--check"], env=env, capture_output=True, text=True, check=False
    )

    line = "".join(pyspark.__version__.split(".")[:2])
    assert check.returncode == 2, check.stderr
    assert check.stderr.strip().splitlines() == [
        f"cdc-ingest: error: pyspark-client 4.2.0 is installed over pyspark "
        f"{pyspark.__version__}: they must be one Spark version; pip install "
        f"'cdc-ingest[spark{line}]' with its constraints file (docs/deploying.md)"
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [("spark.sql.ansi.enabled", "true"), ("spark.sql.legacy.codingErrorAction", "false")],
)
def test_a_pipelines_file_may_not_turn_the_jobs_spark_semantics_off(tmp_path, capsys, key, value):
    """Spark 4 runs ANSI mode by default; the job sets it off on both lines, so that a value
    that cannot be cast is a dead letter with its reason, and a file may not turn it on."""
    from cdc_ingest.cli import main

    path = tmp_path / "pipelines.yaml"
    path.write_text(
        "catalog: {name: lake, uri: 'sqlite:////tmp/x.db', warehouse: 'file:///tmp/x'}\n"
        f"spark: {{conf: {{{key}: '{value}', spark.executor.memory: 1g}}}}\n"
        "pipelines:\n"
        "  - {name: a, format: canal-json, landing: 'file:///tmp/a', namespace: ods}\n"
    )

    assert main(["check", "--config", str(path)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"spark.conf: sets {key}={value}, but the job's dead letters" in line, line
