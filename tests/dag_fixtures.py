"""DAG-parsing fixtures shared by the DAG test modules: an AIRFLOW_HOME, a clean environment,
a two-pipeline pipelines file and the DagBag of ``dags/`` (registered in conftest.py)."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
DAG_FOLDER = REPO / "dags"
DAG_FILE = DAG_FOLDER / "cdc_ingest_dags.py"
APPLICATION = REPO / "jobs" / "cdc_ingest" / "application" / "ingest_job.py"


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A throw-away AIRFLOW_HOME, set before anything in this session imports airflow.

    Airflow reads AIRFLOW_HOME once, when it is first imported, so the airflow imports in this
    module all happen inside tests, after this fixture has run.
    """
    home = tmp_path_factory.mktemp("airflow-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_HOME", str(home))
        mp.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
        mp.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(DAG_FOLDER))
        yield home


@pytest.fixture
def clean_env(airflow_home: Path) -> Iterator[None]:
    """Restore os.environ afterwards: parsing the DAG file sets AIRFLOW_CONN_SPARK_LOCAL."""
    saved = dict(os.environ)
    os.environ.pop("AIRFLOW_CONN_SPARK_LOCAL", None)
    os.environ.pop("CDC_INGEST_CONFIG", None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """Two pipelines: a scheduled Lindorm one with 4 retries, an unscheduled Arcion one."""
    path = tmp_path / "pipelines.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            catalog:
              name: lake
              uri: sqlite:///{tmp_path}/catalog.db
              warehouse: file://{tmp_path}/warehouse
            spark:
              conf:
                spark.sql.shuffle.partitions: "2"
            pipelines:
              - name: orders_ld
                format: lindorm
                landing: file://{tmp_path}/landing/orders
                namespace: ods
                schedule: "*/5 * * * *"
                retries: 4
                maintenance:
                  schedule: "0 3 * * *"
                  retain_snapshots: 5
                  orphan_older_than: 2d
                  triggers: none
                keys:
                  orders: [id]
              - name: crm_arcion
                format: arcion
                landing: file://{tmp_path}/landing/crm
                namespace: ods
            """
        ),
        encoding="utf-8",
    )
    return path


def dagbag() -> Any:
    from airflow.models import DagBag

    # Airflow 3 has no include_examples argument; AIRFLOW__CORE__LOAD_EXAMPLES=False covers it.
    return DagBag(dag_folder=str(DAG_FOLDER))
