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

from typing import Any

from cdc_ingest.catalog.config import CatalogConfig, is_secret
from cdc_ingest.catalog.properties import env_name, warehouse_s3_properties
from cdc_ingest.config import PipelineConfig
from cdc_ingest.landing.zones import ADDRESSING_STYLES, LandingError, S3Access


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


def job_environment(
    aws_conn_id: str | None, catalog: CatalogConfig | None, log: Any
) -> dict[str, str]:
    """The variables spark-submit's environment gets from the connections: the landing zone's
    (``aws_conn_id``) and the catalog's; task time only. Logs which, never their values."""
    env: dict[str, str] = {}
    if aws_conn_id is not None:
        access = s3_access_from_connection(aws_conn_id)
        env.update(access.to_env())
        log.info("S3 landing zone: %r", access)
    if catalog is not None:
        catalog_env = catalog_environment(catalog)
        env.update(catalog_env)
        if catalog_env:
            log.info(
                "catalog %s: properties from Airflow connections: %s",
                catalog.name,
                ", ".join(sorted(catalog_env)),
            )
    return env
