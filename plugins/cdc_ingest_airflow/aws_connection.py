"""Airflow connections behind the job: S3 landing zones, the catalog's secret, an S3 warehouse.

Connections are looked up when a task runs, never while the DAG file is parsed (that would hit
the metadata database or a secrets backend on every parse):

- a pipeline's ``aws_conn_id`` (its S3 landing zone): ``check_landing`` lists the landing zone in
  the Airflow worker (:func:`pipeline_s3_access`); ``apply_batch`` hands it to the Spark job as the
  standard AWS variables of spark-submit's environment. spark-submit may run where Airflow's
  connection lookup is not available, and the environment keeps the secret off its command line;
  the job's driver then carries the settings to its Python workers inside the read task.
- the catalog's ``conn_id`` and ``aws_conn_id``: resolved into catalog properties
  (:func:`catalog_environment`), carried as ``PYICEBERG_CATALOG__<NAME>__<KEY>`` variables to
  spark-submit and used as they are by the pyiceberg readers (``check_landing``, ``batch_summary``).

Connection fields, as the Amazon provider reads them: ``login``/``password`` (or the extras
``aws_access_key_id``/``aws_secret_access_key``) are the key pair, extras ``aws_session_token``,
``region_name`` and ``endpoint_url`` (else the connection's ``host``), and
``config_kwargs.s3.addressing_style`` (``path`` for MinIO, ``virtual`` for OSS).
"""

from __future__ import annotations

import os
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException
from cdc_ingest.catalog.config import CatalogConfig, is_secret
from cdc_ingest.catalog.properties import env_name, warehouse_s3_properties
from cdc_ingest.config import PipelineConfig
from cdc_ingest.landing.zones import ADDRESSING_STYLES, LandingError, S3Access

from cdc_ingest_airflow.assets import emit_table_events, pipeline_alias


class CatalogConnectionError(RuntimeError):
    """The catalog's Airflow connection is missing or does not fit the catalog's type."""


def _connection(conn_id: str, role: str) -> Any:
    from airflow.sdk import BaseHook

    try:
        return BaseHook.get_connection(conn_id)
    except Exception as exc:
        raise CatalogConnectionError(f"Airflow connection {conn_id!r} ({role}): {exc}") from exc


def s3_access_from_connection(conn_id: str, role: str = "aws_conn_id") -> S3Access:
    """The S3 settings of Airflow connection ``conn_id``; call only while a task runs.

    Raises:
        LandingError: the connection is not defined or names an unknown addressing style.
    """
    from airflow.sdk import BaseHook
    from airflow.sdk.log import mask_secret

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:
        raise LandingError(f"Airflow connection {conn_id!r} ({role}): {exc}") from exc
    extra: dict[str, Any] = conn.extra_dejson or {}
    secret = conn.password or extra.get("aws_secret_access_key")
    token = extra.get("aws_session_token")
    for value in (secret, token):
        if value:
            mask_secret(value)
    style = ((extra.get("config_kwargs") or {}).get("s3") or {}).get("addressing_style")
    if style is not None and style not in ADDRESSING_STYLES:
        raise LandingError(
            f"Airflow connection {conn_id!r}: config_kwargs.s3.addressing_style {style!r} must be "
            f"one of {', '.join(ADDRESSING_STYLES)}"
        )
    return S3Access(
        endpoint=extra.get("endpoint_url") or conn.host or None,
        region=extra.get("region_name") or None,
        access_key_id=conn.login or extra.get("aws_access_key_id") or None,
        secret_access_key=secret or None,
        session_token=token or None,
        addressing_style=style,
        source=f"Airflow connection {conn_id!r}",
    )


def pipeline_s3_access(pipeline: PipelineConfig) -> S3Access | None:
    """The pipeline's connection settings, or None for the standard AWS environment variables."""
    if pipeline.aws_conn_id is None or not pipeline.landing.startswith("s3://"):
        return None
    return s3_access_from_connection(pipeline.aws_conn_id)


def catalog_connection_properties(catalog: CatalogConfig) -> dict[str, str]:
    """Catalog properties from ``catalog.conn_id`` and ``catalog.aws_conn_id``; task time only.

    ``conn_id``: for a JDBC catalog, ``login``/``password`` are the database user and password;
    for REST, ``login``/``password`` are the OAuth2 client id and secret (Iceberg's
    ``credential``), or the extra ``token`` is a bearer token; extra ``scope`` and
    ``oauth2-server-uri`` are passed on, as is any other key of the extra ``properties``.
    ``aws_conn_id``: S3FileIO's endpoint, region, addressing and keys for an ``s3://`` warehouse.
    Every secret is registered with Airflow's masker before anything can log it.

    Raises:
        CatalogConnectionError: a connection is not defined (or the AWS one names an unknown
            addressing style).
    """
    from airflow.sdk.log import mask_secret

    props: dict[str, str] = {}
    if catalog.aws_conn_id is not None:
        try:
            access = s3_access_from_connection(catalog.aws_conn_id, "catalog.aws_conn_id")
        except LandingError as exc:
            raise CatalogConnectionError(str(exc)) from exc
        props.update(warehouse_s3_properties(access))
    if catalog.conn_id is not None:
        conn = _connection(catalog.conn_id, "catalog.conn_id")
        extra: dict[str, Any] = conn.extra_dejson or {}
        if catalog.type == "jdbc":
            props.update({"jdbc.user": conn.login, "jdbc.password": conn.password})
        elif catalog.type == "rest" and conn.login:
            props["credential"] = f"{conn.login}:{conn.password or ''}"
        for key in ("token", "scope", "oauth2-server-uri"):
            if extra.get(key):
                props[key] = str(extra[key])
        props.update({str(k): str(v) for k, v in (extra.get("properties") or {}).items()})
    props = {k: v for k, v in props.items() if v}
    for key, value in props.items():
        if is_secret(key):
            mask_secret(value)
    return props


def catalog_environment(catalog: CatalogConfig) -> dict[str, str]:
    """:func:`catalog_connection_properties` as the variables the job and pyiceberg read."""
    return {env_name(catalog.name, k): v for k, v in catalog_connection_properties(catalog).items()}


class IngestSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that puts the job's Airflow connections into spark-submit's
    environment.

    Args:
        aws_conn_id: the landing zone's Airflow AWS connection.
        catalog: the pipelines file's catalog, whose ``conn_id`` and ``aws_conn_id`` are resolved.
        config_path: the pipelines file, and ``pipeline_name`` the pipeline: once the job is done,
            one asset event per table its batch changed (``cdc_ingest_airflow.assets``) goes out
            through the pipeline's asset alias, which the task declares as its outlet.
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
        """Resolve the connections into the environment, then spark-submit."""
        env = dict(self.env_vars or {})
        if self.aws_conn_id is not None:
            access = s3_access_from_connection(self.aws_conn_id)
            env.update(access.to_env())
            self.log.info("S3 landing zone: %r", access)
        if self.catalog is not None:
            catalog_env = catalog_environment(self.catalog)
            env.update(catalog_env)
            if catalog_env:
                self.log.info(
                    "catalog %s: properties from Airflow connections: %s",
                    self.catalog.name,
                    ", ".join(sorted(catalog_env)),
                )
        self.env_vars = env
        if not self._ran_on_engine(env):
            super().execute(context)
        if self.config_path and self.pipeline_name and self.catalog and self.namespace:
            # lake_state reads the batch's row with pyiceberg (and imports this module).
            from cdc_ingest.config import load_config

            from cdc_ingest_airflow.lake_state import batch_snapshots, batch_summary, pending
            from cdc_ingest_airflow.metrics import send_batch_metrics

            summary = batch_summary(
                self.config_path, self.pipeline_name, context["run_id"], dry_run=False
            )
            self._batch = summary
            try:
                snapshots = batch_snapshots(self.config_path, summary)
            except Exception as exc:  # the batch is applied: its events go out without them
                self.log.warning("the batch's snapshots could not be read: %s", exc)
                snapshots = {}
            uris = emit_table_events(
                context["outlet_events"],
                self.pipeline_name,
                self.catalog.name,
                self.namespace,
                summary,
                snapshots,
            )
            self.log.info("asset events: %s", ", ".join(uris) or "none (no table changed)")
            if summary.get("batch_id") is not None:
                waiting = pending(load_config(self.config_path), self.pipeline_name)
                sent = send_batch_metrics(summary, len(waiting.files))
                self.log.info("metrics: %d sent through Airflow's metrics client", sent)

    def _ran_on_engine(self, env: dict[str, str]) -> bool:
        """Run the job's command on the warm engine if one answers (``cdc_ingest.engine``), its
        output in the task's log; False if none does (or it asks for spark-submit: lineage)."""
        from cdc_ingest.engine.client import relay_run

        from cdc_ingest_airflow.engine_connection import engine_environment

        named = engine_environment(self.engine_conn_id) if self.engine_conn_id else {}
        errors: list[str] = []
        out, err = _LogLines(self.log.info), _LogLines(self.log.warning, errors)
        environment = {**os.environ, **env, **named}
        status = relay_run(list(self.application_args or []), environment, out, err)
        out.flush()
        err.flush()
        if status is None:
            if named:
                self.log.warning(
                    "the warm engine of connection %s (%s) does not answer: spark-submit instead",
                    self.engine_conn_id,
                    next(iter(named.values())),
                )
            return False
        self.log.info("ran on the warm engine (cdc-ingest engine status shows it)")
        if status != 0:
            reason = errors[-1] if errors else f"exit status {status}"
            raise AirflowException(f"cdc-ingest on the warm engine failed: {reason}")
        return True

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The task's OpenLineage datasets (:mod:`cdc_ingest_airflow.lineage`)."""
        from cdc_ingest.config import load_config

        from cdc_ingest_airflow.lineage import operator_lineage

        if not (self.config_path and self.pipeline_name and self.catalog and self.namespace):
            return None
        pipeline = load_config(self.config_path).pipeline(self.pipeline_name)
        return operator_lineage(pipeline.landing, self.catalog.name, self.namespace, self._batch)


class _LogLines:
    """Output relayed in chunks, logged a whole line at a time (and kept, if asked)."""

    def __init__(self, log: Any, kept: list[str] | None = None) -> None:
        self._log, self._kept, self._partial = log, kept, ""

    def __call__(self, text: str) -> None:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self._emit(line)

    def flush(self) -> None:
        if self._partial:
            self._emit(self._partial)
            self._partial = ""

    def _emit(self, line: str) -> None:
        self._log("%s", line)
        if self._kept is not None and line.strip():
            self._kept.append(line)
