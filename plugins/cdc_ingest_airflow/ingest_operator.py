"""The ingest task's operator: spark-submit of the job, thin over the pieces that do the work.

``IngestSparkSubmitOperator`` is Airflow's ``SparkSubmitOperator`` (its hook submits the job)
with three steps around it, each a module of its own: the connections' variables
(:mod:`cdc_ingest_airflow.aws_connection`), the warm engine that runs the batch when one answers
(:mod:`cdc_ingest_airflow.engine_connection`), and the batch's report once it is applied
(:mod:`cdc_ingest_airflow.batch_report`: summary, asset events, metrics).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from cdc_ingest.catalog.config import CatalogConfig

from cdc_ingest_airflow.assets import pipeline_alias
from cdc_ingest_airflow.aws_connection import job_environment


class IngestSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that puts the job's Airflow connections into spark-submit's
    environment, sends the batch to a warm engine where one answers, and reports the batch.

    Args:
        aws_conn_id: the landing zone's Airflow AWS connection.
        catalog: the pipelines file's catalog, whose ``conn_id`` and ``aws_conn_id`` are resolved.
        config_path: the pipelines file, and ``pipeline_name`` the pipeline: once the job is done,
            one asset event per table its batch changed (``cdc_ingest_airflow.assets``) goes out
            through the pipeline's asset alias, which the task declares as its outlet.
        engine_conn_id: the Airflow connection naming the warm engine.
        **kwargs: as for ``SparkSubmitOperator``.

    Connections are resolved in :meth:`execute`, after templates are rendered, so no secret is
    parsed or stored with the rendered fields, and none is on spark-submit's command line.
    """

    def __init__(
        self,
        *,
        aws_conn_id: str | None = None,
        catalog: CatalogConfig | None = None,
        config_path: str | None = None,
        pipeline_name: str | None = None,
        namespace: str | None = None,
        engine_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        if pipeline_name is not None:
            kwargs.setdefault("outlets", [pipeline_alias(pipeline_name)])
        super().__init__(**kwargs)
        self.aws_conn_id = aws_conn_id
        self.catalog = catalog
        self.config_path, self.pipeline_name, self.namespace = config_path, pipeline_name, namespace
        self.engine_conn_id = engine_conn_id
        self._batch: dict[str, Any] | None = None

    def execute(self, context: Any) -> None:
        """Resolve the connections into the environment, run the job, report its batch."""
        from cdc_ingest_airflow.engine_connection import run_on_engine

        self.env_vars = {
            **(self.env_vars or {}),
            **job_environment(self.aws_conn_id, self.catalog, self.log),
        }
        # An argument templated to nothing (the maintenance run's ``--due``) is no argument.
        args = [a for a in self.application_args or [] if a != ""]
        self.application_args = args
        if not run_on_engine(self.engine_conn_id, args, self.env_vars, self.log):
            super().execute(context)
        if self.config_path and self.pipeline_name and self.catalog and self.namespace:
            from cdc_ingest_airflow.batch_report import report_batch

            self._batch = report_batch(
                context,
                self.config_path,
                self.pipeline_name,
                self.catalog.name,
                self.namespace,
                self.log,
            )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The task's OpenLineage datasets (:mod:`cdc_ingest_airflow.lineage`)."""
        from cdc_ingest.config import load_config

        from cdc_ingest_airflow.lineage import operator_lineage

        if not (self.config_path and self.pipeline_name and self.catalog and self.namespace):
            return None
        pipeline = load_config(self.config_path).pipeline(self.pipeline_name)
        return operator_lineage(pipeline.landing, self.catalog.name, self.namespace, self._batch)
