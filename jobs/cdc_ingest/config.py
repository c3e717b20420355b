"""The pipelines file: one YAML document naming a catalog and the pipelines that feed it.

Loading validates everything a run depends on, so that a typo fails the run at once with one line
naming the file and the offending key rather than half-way through a Spark job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cdc_ingest.alerts_config import AlertsConfig, AlertsConfigError, parse_alerts
from cdc_ingest.catalog.config import (
    IDENTIFIER,
    CatalogConfig,
    CatalogConfigError,
    is_secret,
    parse_catalog,
)
from cdc_ingest.landing.landed_time import LandedAt, LandedAtError, parse_landed_at
from cdc_ingest.lineage import LineageConfig, LineageConfigError, parse_lineage
from cdc_ingest.maintenance_config import (
    MaintenanceConfig,
    MaintenanceConfigError,
    parse_maintenance,
)
from cdc_ingest.schema.routes import Route, RouteError, parse_routes
from cdc_ingest.table_options import (
    EVERY_TABLE,
    PipelineTableOptions,
    TableOptions,
    TableOptionsError,
    parse_table_options,
)

PIPELINE_NAME = re.compile(r"^[a-z0-9_]+$")
ENVELOPES = ("none", "kafka")
FILE_FORMATS = ("json", "avro", "parquet")
TEMPLATE_FIELDS = ("db", "schema", "table", "namespace", "set")
PIPELINE_KEYS = (
    "name",
    "format",
    "landing",
    "envelope",
    "namespace",
    "table",
    "include_tables",
    "exclude_tables",
    "keys",
    "schedule",
    "retries",
    "schema_changes",
    "landed_at",
    "aws_conn_id",
    "maintenance",
    "table_options",
    "deletes",
    "type_mapping",
    "file_format",
    "alerts",
    "column_names",
    "routes",
)
TABLE_FILTERS = ("include_tables", "exclude_tables")
COLUMN_NAME_MODES = ("as-sent", "lowercase")


__all__ = ["CatalogConfig", "Config", "ConfigError", "PipelineConfig", "is_secret", "load_config"]


class ConfigError(ValueError):
    """The pipelines file is missing, malformed, or names something that does not exist."""


@dataclass(frozen=True)
class SparkConfig:
    """How Airflow submits the job: the Spark connection and extra Spark settings."""

    conn_id: str = "spark_local"
    conf: dict[str, str] = field(default_factory=dict)
    # An Airflow connection naming the warm engine the DAGs' tasks use (docs/engine.md); where it
    # is not defined, the engine of the workers' CDC_INGEST_ENGINE_DIR (or its default).
    engine_conn_id: str = "cdc_ingest_engine"


@dataclass(frozen=True)
class PipelineConfig:
    """One landing zone, decoded with one format, mirrored into one namespace."""

    name: str
    format: str
    landing: str
    namespace: str
    envelope: str = "none"
    table: str = "{table}"
    # Source tables (shards) matched by pattern into one table each, before ``table`` applies.
    routes: tuple[Route, ...] = ()
    # Regular expressions a source table's name must match whole (include) or not (exclude).
    include_tables: str | None = None
    exclude_tables: str | None = None
    # as-sent, or lowercase: every column name as its lowercase (configured keys included).
    column_names: str = "as-sent"
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    schedule: str | None = None
    retries: int = 2
    options: dict[str, Any] = field(default_factory=dict)
    landed_at: LandedAt = field(default_factory=LandedAt)  # landing times of files (replays)
    # An Airflow AWS connection for an s3:// landing zone; resolved by the Airflow tasks.
    aws_conn_id: str | None = None
    maintenance: MaintenanceConfig = field(default_factory=MaintenanceConfig)
    # How each target table is shaped and evolved (table_options, deletes, type_mapping,
    # schema_changes).
    tables: PipelineTableOptions = field(default_factory=PipelineTableOptions)
    # What the landed files are: JSON lines (default), or Avro or Parquet container files.
    file_format: str = "json"
    # When a batch fails its DAG run (lag, dead letters, rejected DDL), and who is notified.
    alerts: AlertsConfig = field(default_factory=AlertsConfig)

    @property
    def kafka_coordinates(self) -> bool:
        """Whether records carry Kafka coordinates (a Kafka envelope, or container files named
        ``topic+partition+startOffset``): offsets are then checkpointed and deduplicated."""
        return self.envelope == "kafka" or self.file_format != "json"

    @property
    def bound_table(self) -> str | None:
        """The one target table of a ``table:`` without placeholders (then messages that name no
        table go there too), else None."""
        # Sanitized as target_name sanitizes a template's literal text.
        return None if "{" in self.table else re.sub(r"[^a-z0-9_]", "_", self.table.lower())

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
    lineage: LineageConfig | None = None  # OpenLineage, off unless configured

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
    try:
        routes = parse_routes(raw.get("routes"), where)
    except RouteError as exc:
        raise ConfigError(str(exc)) from None
    table_filters = {key: _table_pattern(raw, key, where) for key in TABLE_FILTERS}
    column_names = str(raw.get("column_names", "as-sent"))
    if column_names not in COLUMN_NAME_MODES:
        raise ConfigError(
            f"{where}: column_names {column_names!r} must be one of {', '.join(COLUMN_NAME_MODES)}"
        )
    keys = _parse_keys(raw.get("keys"), where)
    if column_names == "lowercase":
        keys = {table: tuple(c.lower() for c in columns) for table, columns in keys.items()}
    retries = raw.get("retries", 2)
    if not isinstance(retries, int) or retries < 0:
        raise ConfigError(f"{where}: retries must be a non-negative integer")
    schedule = raw.get("schedule")
    options = _parse_options(raw, fmt, where)
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
    file_format = str(raw.get("file_format", "json"))
    if file_format not in FILE_FORMATS:
        raise ConfigError(
            f"{where}: file_format {file_format!r} must be one of {', '.join(FILE_FORMATS)}"
        )
    if file_format != "json" and envelope != "none":
        raise ConfigError(
            f"{where}: file_format {file_format} records are message values (their Kafka "
            "coordinates come from the file name): envelope must be none"
        )
    try:
        alerts = parse_alerts(raw.get("alerts"))
    except AlertsConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    try:
        tables = parse_table_options(raw, where)
    except TableOptionsError as exc:
        raise ConfigError(str(exc)) from None
    return PipelineConfig(
        name=name,
        format=fmt,
        landing=landing.rstrip("/"),
        namespace=namespace,
        envelope=envelope,
        table=table,
        routes=routes,
        **table_filters,
        column_names=column_names,
        keys=keys,
        schedule=None if schedule in (None, "", "none", "None") else str(schedule),
        retries=retries,
        options=options,
        landed_at=landed_at,
        aws_conn_id=aws_conn_id,
        maintenance=maintenance,
        tables=tables,
        file_format=file_format,
        alerts=alerts,
    )


def _table_pattern(raw: dict[str, Any], key: str, where: str) -> str | None:
    """A table filter: a regular expression a source table's whole name is matched against."""
    pattern = raw.get(key)
    if pattern is None:
        return None
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"{where}: {key} must be a regular expression (a string)")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{where}: {key} {pattern!r} is not a regular expression: {exc}") from (
            None
        )
    return pattern


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


def conflicting_designs(pipelines: tuple[PipelineConfig, ...]) -> str | None:
    """Two pipelines of one namespace that name one table (in ``table_options``, or as their
    one ``table``) and give it different options, or None: its design would change with each
    pipeline's run. (A table only one of them names follows the pipeline that created it.)"""
    named: dict[tuple[str, str], dict[str, TableOptions]] = {}
    for p in pipelines:
        tables = {t for t in p.tables.layers if t not in ("", EVERY_TABLE)}
        tables |= {p.bound_table} if p.bound_table else set()
        for table in sorted(tables):
            sharing = named.setdefault((p.namespace.lower(), table.lower()), {})
            sharing.setdefault(p.name, p.tables.for_table(table))
    for (namespace, table), sharing in sorted(named.items()):
        [(first, options), *others] = sharing.items()
        for other, theirs in others:
            if theirs != options:
                return (
                    f"pipelines {first} and {other} give table {namespace}.{table} "
                    "different table_options: give them in one of the two"
                )
    return None


# Spark settings the job's results depend on, the same on both Spark lines: a cast that cannot
# convert gives null (a dead letter with its reason, not a failed batch) and a bigint casts to
# binary (the stored order); invalid UTF-8 decodes to replacement characters (the reader's flag);
# epoch values stay UTC instants. A pipelines file may not set them otherwise.
JOB_SPARK_SETTINGS = {
    "spark.sql.ansi.enabled": "false",
    "spark.sql.legacy.codingErrorAction": "true",
    "spark.sql.session.timeZone": "UTC",
}


def _job_setting_overridden(conf: dict[str, str]) -> str | None:
    for key, value in JOB_SPARK_SETTINGS.items():
        if key in conf and conf[key].strip().lower() != value.lower():
            return (
                f"spark.conf sets {key}={conf[key]}, but the job's dead letters, orders and "
                f"times rely on {value} on every Spark line: leave it out"
            )
    return None


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
    try:
        catalog = parse_catalog(raw.get("catalog"), path)
    except CatalogConfigError as exc:
        raise ConfigError(str(exc)) from None
    pipelines_raw = raw.get("pipelines")
    if not isinstance(pipelines_raw, list) or not pipelines_raw:
        raise ConfigError(f"{path}: 'pipelines' must be a non-empty list")
    formats = format_names()
    pipelines = tuple(_parse_pipeline(p, i, path, formats) for i, p in enumerate(pipelines_raw))
    names = [p.name for p in pipelines]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ConfigError(f"{path}: pipeline names must be unique: {', '.join(duplicated)}")
    conflict = conflicting_designs(pipelines)
    if conflict:
        raise ConfigError(f"{path}: {conflict}")
    spark_raw = raw.get("spark") or {}
    if not isinstance(spark_raw, dict):
        raise ConfigError(f"{path}: 'spark' must be a mapping (conn_id, conf, engine_conn_id)")
    spark = SparkConfig(
        conn_id=str(spark_raw.get("conn_id", "spark_local")),
        conf={str(k): str(v) for k, v in (spark_raw.get("conf") or {}).items()},
        engine_conn_id=str(spark_raw.get("engine_conn_id", "cdc_ingest_engine")),
    )
    overridden = _job_setting_overridden(spark.conf)
    if overridden:
        raise ConfigError(f"{path}: {overridden}")
    try:
        lineage = parse_lineage(raw.get("lineage"))
    except LineageConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return Config(path=path, catalog=catalog, pipelines=pipelines, spark=spark, lineage=lineage)
