"""The pipelines file: one YAML document naming a catalog and the pipelines that feed it.

Loading validates everything a run depends on, so that a typo fails the run at once with one line
naming the file and the offending key rather than half-way through a Spark job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import yaml

from cdc_ingest.landed_time import LandedAt, LandedAtError, parse_landed_at
from cdc_ingest.maintenance_config import (
    MaintenanceConfig,
    MaintenanceConfigError,
    parse_maintenance,
)

PIPELINE_NAME = re.compile(r"^[a-z0-9_]+$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENVELOPES = ("none", "kafka")
TEMPLATE_FIELDS = ("db", "schema", "table", "namespace", "set")
PIPELINE_KEYS = (
    "name",
    "format",
    "landing",
    "envelope",
    "namespace",
    "table",
    "keys",
    "schedule",
    "retries",
    "schema_changes",
    "landed_at",
    "aws_conn_id",
    "maintenance",
)
SCHEMA_CHANGE_POLICIES = ("evolve", "ignore", "fail")


class ConfigError(ValueError):
    """The pipelines file is missing, malformed, or names something that does not exist."""


CATALOG_TYPES = ("jdbc", "rest", "glue", "hive")
CATALOG_KEYS = ("name", "type", "uri", "warehouse", "properties", "conn_id", "aws_conn_id")
# A catalog property whose key contains one of these holds a secret: never printed, never logged.
SECRET_WORDS = ("password", "secret", "credential", "token", "session")
_USERINFO = re.compile(r"^(postgresql(?:\+\w+)?://)(?:[^:@/]+(?::[^@/]*)?@)?(.+)$")


def is_secret(key: str) -> bool:
    """Whether catalog property ``key`` holds a secret."""
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS)


@dataclass(frozen=True)
class CatalogConfig:
    """Where the Iceberg tables live: a catalog (JDBC, REST, Glue, Hive) and its warehouse.

    Attributes:
        name: the catalog's name in Spark and pyiceberg (JDBC catalogs store it in every row).
        uri: ``sqlite:///...`` or ``postgresql://...`` (jdbc), ``http(s)://...`` (rest),
            ``thrift://...`` (hive); glue needs none.
        warehouse: ``file:///...`` or ``s3://bucket/prefix``; for rest, what the server expects.
        type: the catalog's kind.
        properties: Iceberg catalog properties for both engines (no secrets: see ``conn_id``).
        conn_id: Airflow connection holding the catalog's secret (JDBC user and password; REST
            client id and secret, or a token in its extra), resolved when a task runs.
        aws_conn_id: Airflow AWS connection for an ``s3://`` warehouse (else the AWS variables).
    """

    name: str
    uri: str
    warehouse: str
    type: str = "jdbc"
    properties: dict[str, str] = field(default_factory=dict)
    conn_id: str | None = None
    aws_conn_id: str | None = None

    @property
    def database(self) -> str | None:
        """A JDBC catalog's database kind (``sqlite`` or ``postgresql``); None for the others."""
        if self.type != "jdbc":
            return None
        return "postgresql" if self.uri.startswith("postgresql") else "sqlite"

    @property
    def sqlalchemy_url(self) -> str:
        """The catalog URI for pyiceberg's SqlCatalog (SQLAlchemy), driver named explicitly.

        A bare ``postgresql://`` would make SQLAlchemy pick psycopg2 anyway; naming it keeps the
        dependency (pyiceberg's ``sql-postgres`` extra) visible.
        """
        if self.uri.startswith("postgresql://"):
            return "postgresql+psycopg2://" + self.uri[len("postgresql://") :]
        return self.uri

    def sqlalchemy_url_with(self, user: str | None, password: str | None) -> str:
        """:attr:`sqlalchemy_url` with these credentials in place of any in the URI."""
        url = self.sqlalchemy_url
        match = _USERINFO.match(url)
        if match is None or user is None:
            return url
        userinfo = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "")
        return f"{match.group(1)}{userinfo}@{match.group(2)}"

    @property
    def jdbc_url(self) -> str:
        """The catalog URI in the JDBC form Spark's Iceberg JdbcCatalog wants."""
        if self.uri.startswith("sqlite:///"):
            return "jdbc:sqlite:" + self.uri[len("sqlite:///") :]
        match = re.match(r"^postgresql(?:\+\w+)?://(?:([^:@/]+)(?::([^@/]*))?@)?(.+)$", self.uri)
        if match:
            return "jdbc:postgresql://" + match.group(3)
        raise ConfigError(
            f"catalog.uri {self.uri!r}: only sqlite:/// and postgresql:// are supported"
        )

    @property
    def jdbc_credentials(self) -> tuple[str | None, str | None]:
        """User and password embedded in a PostgreSQL URI, if any."""
        match = re.match(r"^postgresql(?:\+\w+)?://([^:@/]+)(?::([^@/]*))?@", self.uri)
        if not match:
            return None, None
        password = match.group(2)
        return unquote(match.group(1)), None if password is None else unquote(password)


@dataclass(frozen=True)
class SparkConfig:
    """How Airflow submits the job: the Spark connection and extra Spark settings."""

    conn_id: str = "spark_local"
    conf: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PipelineConfig:
    """One landing zone, decoded with one format, mirrored into one namespace."""

    name: str
    format: str
    landing: str
    namespace: str
    envelope: str = "none"
    table: str = "{table}"
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    schedule: str | None = None
    retries: int = 2
    options: dict[str, Any] = field(default_factory=dict)
    schema_changes: str = "evolve"
    landed_at: LandedAt = field(default_factory=LandedAt)  # landing times of files (replays)
    # An Airflow AWS connection for an s3:// landing zone; resolved by the Airflow tasks.
    aws_conn_id: str | None = None
    maintenance: MaintenanceConfig = field(default_factory=MaintenanceConfig)

    def keys_for(self, db: str | None, schema: str | None, table: str | None) -> tuple[str, ...]:
        """Configured key columns for a source table, most qualified name first."""
        candidates = [
            ".".join(p for p in (db, schema, table) if p),
            ".".join(p for p in (db, table) if p),
            ".".join(p for p in (schema, table) if p),
            table or "",
        ]
        for name in candidates:
            if name and name in self.keys:
                return self.keys[name]
        return ()


@dataclass(frozen=True)
class Config:
    """A parsed pipelines file."""

    path: Path
    catalog: CatalogConfig
    pipelines: tuple[PipelineConfig, ...]
    spark: SparkConfig = field(default_factory=SparkConfig)

    def pipeline(self, name: str) -> PipelineConfig:
        """The pipeline called ``name``, or a ConfigError listing the ones that exist."""
        for pipeline in self.pipelines:
            if pipeline.name == name:
                return pipeline
        known = ", ".join(p.name for p in self.pipelines) or "none"
        raise ConfigError(f"{self.path}: no pipeline named {name!r} (pipelines: {known})")


def _require(mapping: dict[str, Any], key: str, where: str) -> Any:
    if key not in mapping or mapping[key] in (None, ""):
        raise ConfigError(f"{where}: missing required key {key!r}")
    return mapping[key]


def _parse_keys(raw: Any, where: str) -> dict[str, tuple[str, ...]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}.keys: expected a mapping of table -> [columns], got {raw!r}")
    keys: dict[str, tuple[str, ...]] = {}
    for table, columns in raw.items():
        if isinstance(columns, str):
            columns = [columns]
        if (
            not isinstance(columns, list)
            or not columns
            or not all(isinstance(c, str) and c for c in columns)
        ):
            raise ConfigError(f"{where}.keys.{table}: expected a non-empty list of column names")
        keys[str(table)] = tuple(columns)
    return keys


def _parse_pipeline(raw: Any, index: int, path: Path, formats: tuple[str, ...]) -> PipelineConfig:
    where = f"{path}: pipelines[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping")
    name = str(_require(raw, "name", where))
    where = f"{path}: pipeline {name!r}"
    if not PIPELINE_NAME.match(name):
        raise ConfigError(f"{where}: name must match [a-z0-9_]+")
    fmt = str(_require(raw, "format", where))
    if fmt not in formats:
        raise ConfigError(f"{where}: unknown format {fmt!r} (known: {', '.join(formats)})")
    landing = str(_require(raw, "landing", where))
    if not (landing.startswith("file://") or landing.startswith("s3://")):
        raise ConfigError(f"{where}: landing {landing!r} must be a file:// or s3:// URI")
    envelope = str(raw.get("envelope", "none"))
    if envelope not in ENVELOPES:
        raise ConfigError(f"{where}: envelope {envelope!r} must be one of {', '.join(ENVELOPES)}")
    namespace = str(_require(raw, "namespace", where))
    if not IDENTIFIER.match(namespace):
        raise ConfigError(f"{where}: namespace {namespace!r} is not a valid identifier")
    table = str(raw.get("table", "{table}"))
    for placeholder in re.findall(r"{([^}]*)}", table):
        if placeholder not in TEMPLATE_FIELDS:
            raise ConfigError(
                f"{where}: table template {table!r} uses {{{placeholder}}}; "
                f"allowed: {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}"
            )
    retries = raw.get("retries", 2)
    if not isinstance(retries, int) or retries < 0:
        raise ConfigError(f"{where}: retries must be a non-negative integer")
    schedule = raw.get("schedule")
    options = _parse_options(raw, fmt, where)
    schema_changes = str(raw.get("schema_changes", "evolve"))
    if schema_changes not in SCHEMA_CHANGE_POLICIES:
        raise ConfigError(
            f"{where}: schema_changes {schema_changes!r} must be one of "
            f"{', '.join(SCHEMA_CHANGE_POLICIES)}"
        )
    try:
        landed_at = parse_landed_at(raw.get("landed_at"), where)
    except LandedAtError as exc:
        raise ConfigError(str(exc)) from None
    aws_conn_id = raw.get("aws_conn_id")
    if aws_conn_id is not None and not (isinstance(aws_conn_id, str) and aws_conn_id.strip()):
        raise ConfigError(f"{where}: aws_conn_id must be an Airflow connection id (a string)")
    try:
        maintenance = parse_maintenance(raw.get("maintenance"))
    except MaintenanceConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return PipelineConfig(
        name=name,
        format=fmt,
        landing=landing.rstrip("/"),
        namespace=namespace,
        envelope=envelope,
        table=table,
        keys=_parse_keys(raw.get("keys"), where),
        schedule=None if schedule in (None, "", "none", "None") else str(schedule),
        retries=retries,
        options=options,
        schema_changes=schema_changes,
        landed_at=landed_at,
        aws_conn_id=aws_conn_id,
        maintenance=maintenance,
    )


def _parse_options(raw: dict[str, Any], fmt: str, where: str) -> dict[str, Any]:
    from cdc_ingest.formats.options import OptionError, option_names, parse_options

    extra = {k: v for k, v in raw.items() if k not in PIPELINE_KEYS}
    allowed = option_names(fmt)
    for key in extra:
        if key not in allowed:
            format_keys = f"; format {fmt!r} also takes {', '.join(allowed)}" if allowed else ""
            raise ConfigError(
                f"{where}: unknown key {key!r} (pipeline keys: {', '.join(PIPELINE_KEYS)}"
                f"{format_keys})"
            )
    try:
        return parse_options(fmt, extra)
    except OptionError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def load_config(path: str | Path) -> Config:
    """Read and validate a pipelines file.

    Args:
        path: the YAML file.

    Returns:
        The parsed configuration.

    Raises:
        ConfigError: with one line naming the file and what is wrong in it.
    """
    from cdc_ingest.formats import format_names

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror or exc})") from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping with 'catalog' and 'pipelines'")
    catalog = _parse_catalog(raw.get("catalog"), path)
    pipelines_raw = raw.get("pipelines")
    if not isinstance(pipelines_raw, list) or not pipelines_raw:
        raise ConfigError(f"{path}: 'pipelines' must be a non-empty list")
    formats = format_names()
    pipelines = tuple(_parse_pipeline(p, i, path, formats) for i, p in enumerate(pipelines_raw))
    names = [p.name for p in pipelines]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ConfigError(f"{path}: pipeline names must be unique: {', '.join(duplicated)}")
    spark_raw = raw.get("spark") or {}
    if not isinstance(spark_raw, dict):
        raise ConfigError(f"{path}: 'spark' must be a mapping (conn_id, conf)")
    spark = SparkConfig(
        conn_id=str(spark_raw.get("conn_id", "spark_local")),
        conf={str(k): str(v) for k, v in (spark_raw.get("conf") or {}).items()},
    )
    return Config(path=path, catalog=catalog, pipelines=pipelines, spark=spark)


def _optional_id(raw: dict[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise ConfigError(f"{where}: {key} must be an Airflow connection id (a string)")
    return value


def _parse_catalog(raw: Any, path: Path) -> CatalogConfig:
    where = f"{path}: catalog"
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: missing 'catalog' mapping (uri, warehouse)")
    unknown = sorted(str(k) for k in raw if k not in CATALOG_KEYS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r} (catalog keys: {', '.join(CATALOG_KEYS)})"
        )
    kind = str(raw.get("type", "jdbc"))
    if kind not in CATALOG_TYPES:
        raise ConfigError(f"{where}: type {kind!r} must be one of {', '.join(CATALOG_TYPES)}")
    properties = raw.get("properties") or {}
    if not isinstance(properties, dict):
        raise ConfigError(f"{where}.properties: expected a mapping of Iceberg catalog properties")
    secrets = sorted(str(k) for k in properties if is_secret(str(k)))
    if secrets:
        raise ConfigError(
            f"{where}.properties: {secrets[0]!r} is a secret; give it through catalog.conn_id "
            "or a PYICEBERG_CATALOG__<NAME>__<KEY> variable, never in the pipelines file"
        )
    uri_required = kind in ("jdbc", "rest", "hive")
    catalog = CatalogConfig(
        name=str(raw.get("name", "lake")),
        uri=str(_require(raw, "uri", where) if uri_required else raw.get("uri") or ""),
        warehouse=str(
            _require(raw, "warehouse", where) if kind != "rest" else raw.get("warehouse") or ""
        ),
        type=kind,
        properties={str(k): str(v) for k, v in properties.items()},
        conn_id=_optional_id(raw, "conn_id", where),
        aws_conn_id=_optional_id(raw, "aws_conn_id", where),
    )
    if not IDENTIFIER.match(catalog.name):
        raise ConfigError(f"{path}: catalog.name {catalog.name!r} is not a valid identifier")
    if kind == "jdbc":
        try:
            _ = catalog.jdbc_url
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    # A REST server may name its warehouses; every other kind takes a location.
    warehouse = catalog.warehouse
    if kind != "rest" and warehouse and not warehouse.startswith(("file://", "s3://", "s3a://")):
        raise ConfigError(
            f"{where}: warehouse {catalog.warehouse!r} must be a file:// or s3:// URI"
        )
    return catalog
