"""The ingest task's own OpenLineage datasets: the landing zone in, the tables it changed out.

With the Airflow OpenLineage provider configured, every task reports a run; an operator adds its
datasets through ``get_openlineage_facets_on_complete``. ``apply_batch`` reports its pipeline's
landing zone as its input (OpenLineage's naming for files: namespace ``file`` or
``s3://<bucket>``, name the directory's path) and each mirrored table its batch changed as an
output, named as the table's asset (``iceberg://<catalog>`` and ``<namespace>.<table>``; see
``assets``). The Spark job's own events (``cdc_ingest.lineage``) have this task as their parent run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from cdc_ingest_airflow.assets import SCHEME, table_events


def landing_dataset(landing: str) -> tuple[str, str]:
    """OpenLineage's (namespace, name) of a landing zone: ``file`` and its path, or
    ``s3://<bucket>`` and its prefix."""
    parsed = urlparse(landing)
    if parsed.scheme == "file":
        return "file", parsed.path
    return f"{parsed.scheme}://{parsed.netloc}", parsed.path.lstrip("/")


def table_datasets(
    catalog: str, namespace: str, summary: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """(namespace, name) of each table the batch changed, the tables asset events name."""
    return [(f"{SCHEME}://{catalog}", f"{namespace}.{t}") for t in sorted(table_events(summary))]


def operator_lineage(
    landing: str, catalog: str, namespace: str, summary: Mapping[str, Any] | None
) -> Any:
    """The ``OperatorLineage`` of one ``apply_batch`` run (no batch: the landing zone only)."""
    from airflow.providers.common.compat.openlineage.facet import Dataset
    from airflow.providers.openlineage.extractors import OperatorLineage

    inputs = [Dataset(namespace=n, name=name) for n, name in [landing_dataset(landing)]]
    outputs = [
        Dataset(namespace=n, name=name)
        for n, name in table_datasets(catalog, namespace, summary or {})
    ]
    return OperatorLineage(inputs=inputs, outputs=outputs)
