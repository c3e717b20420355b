"""S3 landing zones reached through an Airflow AWS connection (a pipeline's ``aws_conn_id``).

The connection is looked up when a task runs, never while the DAG file is parsed (that would hit
the metadata database or a secrets backend on every parse). Two tasks need it:

- ``check_landing`` lists the landing zone in the Airflow worker (:func:`pipeline_s3_access`);
- ``apply_batch`` hands it to the Spark job as the standard AWS variables of spark-submit's
  environment (:class:`IngestSparkSubmitOperator`). spark-submit may run where Airflow's connection
  lookup is not available, and the environment keeps the secret off its command line; the job's
  driver then carries the settings to its Python workers inside the read task.

Connection fields, as the Amazon provider reads them: ``login``/``password`` (or the extras
``aws_access_key_id``/``aws_secret_access_key``) are the key pair, extras ``aws_session_token``,
``region_name`` and ``endpoint_url`` (else the connection's ``host``), and
``config_kwargs.s3.addressing_style`` (``path`` for MinIO, ``virtual`` for OSS).
"""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from cdc_ingest.config import PipelineConfig
from cdc_ingest.landing import ADDRESSING_STYLES, LandingError, S3Access


def s3_access_from_connection(conn_id: str) -> S3Access:
    """The S3 settings of Airflow connection ``conn_id``; call only while a task runs.

    Raises:
        LandingError: the connection is not defined or names an unknown addressing style.
    """
    from airflow.sdk import BaseHook
    from airflow.sdk.log import mask_secret

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:
        raise LandingError(f"Airflow connection {conn_id!r} (aws_conn_id): {exc}") from exc
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


class IngestSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` that adds an AWS connection's settings to spark-submit's environment.

    Args:
        aws_conn_id: the Airflow AWS connection, resolved in :meth:`execute` (after templates are
            rendered, so the secret is neither parsed nor stored with the rendered fields).
        **kwargs: as for ``SparkSubmitOperator``.
    """

    def __init__(self, *, aws_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.aws_conn_id = aws_conn_id

    def execute(self, context: Any) -> None:
        """Resolve the connection into the environment, then spark-submit."""
        if self.aws_conn_id is not None:
            access = s3_access_from_connection(self.aws_conn_id)
            self.env_vars = {**(self.env_vars or {}), **access.to_env()}
            self.log.info("S3 landing zone: %r", access)
        super().execute(context)
