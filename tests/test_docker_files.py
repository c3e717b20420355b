"""docker/ checked statically (no Docker engine runs here): the compose file and the Dockerfile.

Every check runs on the real files and, in the ``broken`` tests, on a copy with one deliberate
mistake, which it must report.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from docker_files import (
    Dockerfile,
    airflow_version_problems,
    constraint_pins,
    constraints_problems,
    dependency_problems,
    dockerfile_install_problems,
    load_compose,
    pyproject_requirements,
    required_service_problems,
    spark_connection_problems,
    spark_version_problems,
    volume_problems,
)

DOCKER = REPO / "docker"
REQUIREMENTS = pyproject_requirements(REPO / "pyproject.toml")
# The tested pins: pyproject.toml declares ranges.
PINS = constraint_pins(REPO / "constraints" / "py3.11-spark3.5-airflow3.3.txt")
PYSPARK = PINS["pyspark"]
AIRFLOW = REQUIREMENTS["apache-airflow"]


@pytest.fixture
def compose() -> dict[str, Any]:
    return load_compose(DOCKER / "docker-compose.yml")


@pytest.fixture
def dockerfile() -> Dockerfile:
    return Dockerfile.parse((DOCKER / "Dockerfile").read_text())


def test_pyproject_pins_are_what_the_stack_notes_say():
    assert PYSPARK == "3.5.9"
    assert str(AIRFLOW.specifier) == "<4,>=3.3"
    assert PINS["apache-airflow"] == "3.3.2"


def test_compose_has_every_service_of_the_stack(compose):
    assert required_service_problems(compose) == []
    assert {"postgres", "spark-master", "spark-worker"} <= set(compose["services"])


def test_compose_depends_on_and_volumes_name_what_exists(compose):
    assert dependency_problems(compose) == []
    assert volume_problems(compose) == []


def test_spark_cluster_runs_the_pinned_spark(compose, dockerfile):
    assert spark_version_problems(compose, dockerfile, PYSPARK) == []


def test_airflow_components_run_the_pinned_airflow(compose, dockerfile):
    assert airflow_version_problems(compose, dockerfile, AIRFLOW) == []


def test_spark_connection_points_at_the_spark_master(compose):
    assert spark_connection_problems(compose) == []
    scheduler = compose["services"]["airflow-scheduler"]
    connection = json.loads(scheduler["environment"]["AIRFLOW_CONN_SPARK_CLUSTER"])
    assert connection["host"] == "spark://spark-master:7077"


def test_dockerfile_installs_java_17_and_the_project_pins(dockerfile):
    assert dockerfile_install_problems(dockerfile, REQUIREMENTS) == []
    # The JVM artifacts come from the one list the job uses, by their Maven coordinates.
    assert any("cdc-ingest setup" in run for run in dockerfile.runs())
    # The image installs the wheel, as users do: nothing of the source tree stays.
    assert any(
        "pip wheel --no-deps" in run and "rm -rf /tmp/cdc-ingest-src" in run
        for run in dockerfile.runs()
    )
    assert "maven" in dockerfile.apt_packages()
    assert dockerfile.base_images() == ["python:3.11-slim-bookworm"]


def test_dockerfile_installs_with_the_constraints_of_its_spark_line(dockerfile):
    assert constraints_problems(dockerfile, REPO) == []
    spark41 = Dockerfile.parse(
        (DOCKER / "Dockerfile")
        .read_text()
        .replace("SPARK_VERSION=3.5.9", "SPARK_VERSION=4.1.1")
        .replace("AIRFLOW_VERSION=3.3.2", "AIRFLOW_VERSION=3.3.0")
    )
    assert constraints_problems(spark41, REPO) == []
    assert constraints_problems(Dockerfile(spark41.instructions, {**spark41.args,
        "SPARK_VERSION": "4.1.3"}), REPO) == [
        "constraints/py3.11-spark4.1-airflow3.3.txt pins pyspark 4.1.1, "
        "the Dockerfile builds 4.1.3"
    ]  # fmt: skip


def test_example_pipelines_file_uses_the_stack(compose):
    from cdc_ingest.config import load_config

    config = load_config(DOCKER / "pipelines.example.yaml")
    services = compose["services"]
    scheduler_env = services["airflow-scheduler"]["environment"]
    assert f"AIRFLOW_CONN_{config.spark.conn_id.upper()}" in scheduler_env
    # A REST catalog service, over the warehouse bucket that minio-init creates, on MinIO.
    assert config.catalog.type == "rest"
    assert config.catalog.uri == "http://iceberg-rest:8181"
    rest_env = services["iceberg-rest"]["environment"]
    bucket = config.catalog.warehouse.removeprefix("s3://").split("/")[0]
    assert rest_env["CATALOG_WAREHOUSE"].startswith(f"s3://{bucket}/")
    assert f'"{bucket}"' in " ".join(services["minio-init"]["command"])
    assert config.catalog.properties["s3.endpoint"] == rest_env["CATALOG_S3_ENDPOINT"]
    assert config.catalog.aws_conn_id is not None
    connection = json.loads(scheduler_env[f"AIRFLOW_CONN_{config.catalog.aws_conn_id.upper()}"])
    assert connection["extra"]["endpoint_url"] == rest_env["CATALOG_S3_ENDPOINT"]
    assert "iceberg-rest" in services["airflow-scheduler"]["depends_on"]


# Each check must be able to fail: one deliberate mistake per copy.


def test_broken_missing_component_and_dangling_dependency_are_reported(compose):
    broken = copy.deepcopy(compose)
    del broken["services"]["airflow-triggerer"]
    broken["services"]["spark-worker"]["depends_on"] = {"spark-mastr": {}}
    broken["services"]["spark-worker"]["volumes"].append("scratch:/scratch")
    assert required_service_problems(broken) == ["not exactly one service runs `airflow triggerer`"]
    assert dependency_problems(broken) == [
        "spark-worker depends on 'spark-mastr', which is not a service"
    ]
    assert volume_problems(broken) == ["spark-worker mounts undeclared volume 'scratch'"]


def test_broken_versions_and_connection_are_reported(compose, dockerfile):
    broken = copy.deepcopy(compose)
    broken["services"]["spark-master"]["image"] = "cdc-ingest:airflow-3.3.2-spark-3.5.1"
    # Anchored mappings are shared between services after parsing: replace, don't mutate.
    scheduler_build = broken["services"]["airflow-scheduler"]["build"] = copy.deepcopy(
        broken["services"]["airflow-scheduler"]["build"]
    )
    scheduler_build["args"]["AIRFLOW_VERSION"] = "3.2.0"
    env = broken["services"]["airflow-scheduler"]["environment"] = dict(
        broken["services"]["airflow-scheduler"]["environment"]
    )
    env["AIRFLOW_CONN_SPARK_CLUSTER"] = '{"conn_type": "spark", "host": "local[*]"}'
    assert spark_version_problems(broken, dockerfile, PYSPARK) == [
        "spark-master image 'cdc-ingest:airflow-3.3.2-spark-3.5.1' does not name Spark 3.5.9"
    ]
    assert airflow_version_problems(broken, dockerfile, AIRFLOW) == [
        "airflow-scheduler builds AIRFLOW_VERSION=3.2.0, Dockerfile has 3.3.2"
    ]
    assert len(spark_connection_problems(broken)) == 1
    old_spark = Dockerfile.parse((DOCKER / "Dockerfile").read_text().replace("3.5.9", "3.5.8"))
    assert spark_version_problems(compose, old_spark, PYSPARK) == [
        "Dockerfile ARG SPARK_VERSION=3.5.8"
    ]


def test_broken_dockerfile_installs_are_reported():
    text = (DOCKER / "Dockerfile").read_text()
    no_java = Dockerfile.parse(text.replace("openjdk-17-jre-headless", "openjdk-11-jre-headless"))
    assert dockerfile_install_problems(no_java, REQUIREMENTS) == [
        "no openjdk-17 package installed with apt-get"
    ]
    no_project = Dockerfile.parse(
        text.replace('"$(ls /tmp/cdc-ingest-wheel/*.whl)[spark$(echo $line | tr -d .)]"', "x")
    )
    assert dockerfile_install_problems(no_project, REQUIREMENTS) == [
        "the project itself is not pip-installed (its wheel)"
    ]
    old_airflow = Dockerfile.parse(text.replace("AIRFLOW_VERSION=3.3.2", "AIRFLOW_VERSION=3.2.1"))
    assert dockerfile_install_problems(old_airflow, REQUIREMENTS) == [
        "Dockerfile installs apache-airflow[postgres]==3.2.1, "
        "pyproject wants apache-airflow<4,>=3.3"
    ]
    assert airflow_version_problems({"services": {}}, old_airflow, AIRFLOW) == [
        "Dockerfile ARG AIRFLOW_VERSION='3.2.1' not in <4,>=3.3"
    ]


def test_dockerfile_parser_sees_through_continuations_and_comments(tmp_path: Path):
    parsed = Dockerfile.parse(
        "ARG V=1.2\nFROM base:${V}\nRUN apt-get update \\\n    # why\n"
        "    && apt-get install -y --no-install-recommends a b \\\n"
        "    && pip install -e . 'x==${V}'\n"
    )
    assert parsed.base_images() == ["base:1.2"]
    assert parsed.apt_packages() == {"a", "b"}
    assert parsed.pip_installs() == [".", "x==1.2"]
