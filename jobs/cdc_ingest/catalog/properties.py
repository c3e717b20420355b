"""One catalog, two engines: the Iceberg catalog properties Spark and pyiceberg both open it with.

The properties are derived once, in Iceberg's own (Java) names, from, lowest precedence first:

1. the catalog's kind: ``jdbc`` (its URI in JDBC form, the V1 schema pyiceberg reads), ``rest``,
   ``glue`` or ``hive``; an ``s3://`` warehouse adds Iceberg's ``S3FileIO`` with the endpoint,
   region, path-style access and credentials of the standard AWS variables (``AWS_ENDPOINT_URL``,
   ``AWS_ACCESS_KEY_ID``, ...), which also travel to executors on a cluster;
2. ``catalog.properties`` of the pipelines file;
3. secrets from the environment, as pyiceberg spells them: ``PYICEBERG_CATALOG__<NAME>__<KEY>``
   (``PYICEBERG_CATALOG__LAKE__CREDENTIAL``, ``..._JDBC__PASSWORD``,
   ``..._S3__SECRET_ACCESS_KEY``). The Airflow tasks resolve ``catalog.conn_id`` and
   ``catalog.aws_conn_id`` into these variables when they run (never at parse time).

Spark gets them under ``spark.sql.catalog.<name>.``; pyiceberg gets the same after
:func:`pyiceberg_properties` renames the few keys whose spelling differs between the engines.
"""

from __future__ import annotations

from collections.abc import Mapping

from cdc_ingest.catalog.config import CatalogConfig, is_secret
from cdc_ingest.landing.zones import S3Access
from cdc_ingest.run_environment import environ as run_environ

ENV_PREFIX = "PYICEBERG_CATALOG__"
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"


def env_name(catalog_name: str, key: str) -> str:
    """The variable that carries property ``key`` of catalog ``catalog_name`` (pyiceberg's form)."""
    return f"{ENV_PREFIX}{catalog_name}__{key.replace('.', '__').replace('-', '_')}".upper()


def env_properties(catalog_name: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Properties of ``catalog_name`` set through ``PYICEBERG_CATALOG__<NAME>__<KEY>`` variables."""
    prefix = f"{ENV_PREFIX}{catalog_name}__".lower()
    found: dict[str, str] = {}
    for variable, value in environ.items():
        lowered = variable.lower()
        if lowered.startswith(prefix) and value:
            found[lowered[len(prefix) :].replace("__", ".").replace("_", "-")] = value
    return found


def warehouse_s3_properties(access: S3Access) -> dict[str, str]:
    """S3FileIO settings for an ``s3://`` warehouse, from an :class:`S3Access`."""
    values = {
        "s3.endpoint": access.endpoint,
        "client.region": access.region,
        "s3.access-key-id": access.access_key_id,
        "s3.secret-access-key": access.secret_access_key,
        "s3.session-token": access.session_token,
    }
    found = {k: v for k, v in values.items() if v}
    if access.addressing_style in ("path", "virtual"):
        found["s3.path-style-access"] = str(access.addressing_style == "path").lower()
    elif access.endpoint:
        # A custom endpoint (MinIO, Ceph, moto) rarely serves virtual-hosted buckets.
        found["s3.path-style-access"] = "true"
    return found


def _kind_properties(catalog: CatalogConfig, environ: Mapping[str, str]) -> dict[str, str]:
    props: dict[str, str] = {"type": catalog.type}
    if catalog.warehouse:
        props["warehouse"] = catalog.warehouse
    if catalog.type == "jdbc":
        props["uri"] = catalog.jdbc_url
        # pyiceberg's SqlCatalog reads and writes the V1 layout (with iceberg_type).
        props["jdbc.schema-version"] = "V1"
        user, password = catalog.jdbc_credentials
        if user:
            props["jdbc.user"] = user
        if password:
            props["jdbc.password"] = password
    elif catalog.uri:
        props["uri"] = catalog.uri
    if catalog.warehouse.startswith(("s3://", "s3a://")):
        props["io-impl"] = S3_FILE_IO
        props.update(warehouse_s3_properties(S3Access.from_env(environ)))
    return props


def iceberg_properties(
    catalog: CatalogConfig, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The catalog's properties in Iceberg's (Java) names: kind, pipelines file, environment."""
    environ = run_environ() if environ is None else environ
    return {
        **_kind_properties(catalog, environ),
        **catalog.properties,
        **env_properties(catalog.name, environ),
    }


def spark_catalog_conf(
    catalog: CatalogConfig, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Spark settings that register ``catalog`` under its name."""
    prefix = f"spark.sql.catalog.{catalog.name}"
    conf = {prefix: SPARK_CATALOG}
    for key, value in iceberg_properties(catalog, environ).items():
        conf[f"{prefix}.{key}"] = value
    # Other writers (a rerun, another pipeline, pyiceberg) commit to the same tables.
    conf.setdefault(f"{prefix}.cache-enabled", "false")
    return conf


def pyiceberg_properties(
    catalog: CatalogConfig, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The same properties for pyiceberg's ``load_catalog``.

    pyiceberg's SQL catalog takes a SQLAlchemy URL with the credentials in it; it chooses its
    FileIO by the warehouse's scheme and addresses S3 by path unless told otherwise.
    """
    props = iceberg_properties(catalog, environ)
    props.pop("io-impl", None)
    props.pop("jdbc.schema-version", None)
    props.pop("cache-enabled", None)
    if catalog.type == "jdbc":
        props["type"] = "sql"
        props["uri"] = catalog.sqlalchemy_url_with(
            props.pop("jdbc.user", None), props.pop("jdbc.password", None)
        )
    path_style = props.pop("s3.path-style-access", None)
    if path_style is not None:
        props["s3.force-virtual-addressing"] = str(path_style.lower() != "true").lower()
    if "client.region" in props:
        props.setdefault("s3.region", props["client.region"])
    return props


def secret_values(catalog: CatalogConfig, environ: Mapping[str, str] | None = None) -> list[str]:
    """Every secret the catalog's properties hold (for masking and for tests)."""
    props = iceberg_properties(catalog, environ)
    values = [v for k, v in props.items() if is_secret(k) and v]
    # A REST credential is ``client_id:client_secret``: the secret alone must not leak either.
    values += [v.split(":", 1)[1] for k, v in props.items() if k == "credential" and ":" in v]
    return [v for v in values if v]


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every secret value replaced by ``***``."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret:
            text = text.replace(secret, "***")
    return text
