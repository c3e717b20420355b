"""OpenLineage from the job: the OpenLineage Spark integration, off unless configured.

A pipelines file's ``lineage:`` section turns it on for every run of its pipelines::

    lineage:
      namespace: cdc_ingest              # the Spark job's OpenLineage namespace
      transport: {type: file, location: /var/log/lineage.jsonl}   # optional, see below

The job's Spark session then loads ``io.openlineage:openlineage-spark`` (Maven Central, the
release matched to Spark 3.5 and Scala 2.12) as a Spark listener: it reports each Spark job of a
batch, with the files Spark's own sources read and the Iceberg tables of catalogs it can name
(REST, Hive, Hadoop, Glue, Nessie; not JDBC) as its datasets. ``transport`` is
the integration's own (``spark.openlineage.transport.*``: ``http``, ``file``, ``kafka``, ...);
without it, under Airflow, the Airflow OpenLineage provider's HTTP transport is passed on. Under
Airflow the ingest task is the parent run (the provider's ``spark_inject_parent_job_info``), and
the task itself reports the landing zone and the tables its batch changed.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import Any

from pydantic import field_validator
from pydantic.dataclasses import dataclass

from cdc_ingest.config_model import SECTION
from cdc_ingest.jars import artifact_paths, optional_artifacts

LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
DEFAULT_NAMESPACE = "cdc_ingest"
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True, config=SECTION)
class LineageConfig:
    """Where the job's OpenLineage events go (see the module's docstring)."""

    namespace: str = DEFAULT_NAMESPACE
    transport: dict[str, str] = field(default_factory=dict)

    @field_validator("namespace")
    @classmethod
    def _plain(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} must be a plain name")
        return value

    @field_validator("transport", mode="before")
    @classmethod
    def _typed(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict) or (value and "type" not in value):
            raise ValueError("must be a mapping with a type (http, file, kafka, ...)")
        return {str(k): str(v) for k, v in value.items()}


def lineage_section(value: Any) -> Any:
    """The ``lineage:`` section's short forms: absent or false is off, true the defaults."""
    if value in (None, False):
        return None
    return {} if value is True else value


def lineage_conf(lineage: LineageConfig | None) -> dict[str, str]:
    """The Spark settings that load the listener and point it at the transport (none if off)."""
    if lineage is None:
        return {}
    conf = {
        "spark.extraListeners": LISTENER,
        "spark.openlineage.namespace": lineage.namespace,
        # Column lineage of the job's wide decode plans is large and says little here.
        "spark.openlineage.columnLineage.datasetLineageEnabled": "false",
    }
    conf |= {f"spark.openlineage.transport.{k}": v for k, v in lineage.transport.items()}
    return conf


def lineage_jars(lineage: LineageConfig | None) -> list[str]:
    """The listener's jar (resolved by ``make install``) when lineage is on."""
    return artifact_paths(optional_artifacts()) if lineage is not None else []
