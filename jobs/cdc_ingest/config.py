"""The pipelines file: one YAML document naming a catalog and the pipelines that feed it.

Loading validates everything a run depends on, so that a typo fails the run at once with one line
naming the file and the offending key rather than half-way through a Spark job.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import pydantic
import yaml
from pydantic import (
    BeforeValidator,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from cdc_ingest.alerts_config import AlertsConfig
from cdc_ingest.catalog.config import CatalogConfig, Identifier, is_secret, text_values
from cdc_ingest.config_model import (
    SECTION,
    ConfigError,
    ConnectionId,
    LocatedError,
    OneOf,
    Schedule,
    error_line,
    json_schema,
    regular_expression,
)
from cdc_ingest.formats.options import format_options, option_values, parse_option
from cdc_ingest.landing.landed_time import LandedAt, landed_at_section
from cdc_ingest.lineage import LineageConfig, lineage_section
from cdc_ingest.maintenance_config import MaintenanceConfig
from cdc_ingest.schema.routes import Route
from cdc_ingest.schema_policy import parse_schema_changes
from cdc_ingest.table_options import (
    DEFAULTS,
    EVERY_TABLE,
    PIPELINE_WIDE,
    DeleteMode,
    PipelineTableOptions,
    SchemaChanges,
    TableOptions,
    TypeMapping,
    table_layers,
)

PIPELINE_NAME = re.compile(r"^[a-z0-9_]+$")
ENVELOPES = ("none", "kafka")
FILE_FORMATS = ("json", "avro", "parquet")
TEMPLATE_FIELDS = ("db", "schema", "table", "namespace", "set")
COLUMN_NAME_MODES = ("as-sent", "lowercase")


__all__ = ["CatalogConfig", "Config", "ConfigError", "PipelineConfig", "is_secret", "load_config"]


# Spark settings the job's results depend on, the same on both Spark lines: a cast that cannot
# convert gives null (a dead letter with its reason, not a failed batch) and a bigint casts to
# binary (the stored order); invalid UTF-8 decodes to replacement characters (the reader's flag);
# epoch values stay UTC instants. A pipelines file may not set them otherwise.
JOB_SPARK_SETTINGS = {
    "spark.sql.ansi.enabled": "false",
    "spark.sql.legacy.codingErrorAction": "true",
    "spark.sql.session.timeZone": "UTC",
}


@pydantic.dataclasses.dataclass(frozen=True, config=SECTION)
class SparkConfig:
    """How Airflow submits the job: the Spark connection and extra Spark settings."""

    conn_id: str = "spark_local"
    conf: Annotated[dict[str, str], BeforeValidator(text_values)] = field(default_factory=dict)
    # An Airflow connection naming the warm engine the DAGs' tasks use (docs/engine.md); where it
    # is not defined, the engine of the workers' CDC_INGEST_ENGINE_DIR (or its default).
    engine_conn_id: str = "cdc_ingest_engine"

    @field_validator("conf")
    @classmethod
    def _job_settings_kept(cls, conf: dict[str, str]) -> dict[str, str]:
        for key, value in JOB_SPARK_SETTINGS.items():
            if key in conf and conf[key].strip().lower() != value.lower():
                raise ValueError(
                    f"sets {key}={conf[key]}, but the job's dead letters, orders and times rely "
                    f"on {value} on every Spark line: leave it out"
                )
        return conf


def _format_name(value: Any) -> Any:
    from cdc_ingest.formats import format_names

    formats = format_names()
    if value not in formats:
        raise ValueError(f"{value!r} is unknown (known: {', '.join(formats)})")
    return value


def _table_pattern(pattern: Any) -> str | None:
    """A table filter: a regular expression a source table's whole name is matched against."""
    return None if pattern is None else regular_expression(pattern)


def _keys(raw: Any) -> Any:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"expected a mapping of table -> [columns], got {raw!r}")
    keys: dict[str, tuple[str, ...]] = {}
    for table, columns in raw.items():
        if isinstance(columns, str):
            columns = [columns]
        if (
            not isinstance(columns, list | tuple)
            or not columns
            or not all(isinstance(c, str) and c for c in columns)
        ):
            raise LocatedError(f"keys.{table}: expected a non-empty list of column names")
        keys[str(table)] = tuple(columns)
    return keys


def _retries(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("must be a non-negative integer")
    return value


def _routes(value: Any) -> Any:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ValueError("must be a list of {source, table} mappings")
    return value


def _format_option(name: str) -> BeforeValidator:
    return BeforeValidator(functools.partial(parse_option, name))


_LAYERS_SCHEMA = {
    "type": "object",
    "additionalProperties": json_schema(TableOptions),
    "examples": [{"*": {"partition_by": ["days(created_at)"]}}],
}


@pydantic.dataclasses.dataclass(frozen=True, config=SECTION)
class PipelineConfig:
    """One landing zone, decoded with one format, mirrored into one namespace: an entry of the
    file's ``pipelines``, its keys and their defaults."""

    name: str
    format: Annotated[str, BeforeValidator(_format_name)]
    landing: str
    namespace: Identifier
    envelope: Annotated[str, OneOf(ENVELOPES)] = "none"
    table: str = "{table}"
    # Source tables (shards) matched by pattern into one table each, before ``table`` applies.
    routes: Annotated[tuple[Route, ...], BeforeValidator(_routes)] = ()
    # Regular expressions a source table's name must match whole (include) or not (exclude).
    include_tables: Annotated[str | None, BeforeValidator(_table_pattern)] = None
    exclude_tables: Annotated[str | None, BeforeValidator(_table_pattern)] = None
    # as-sent, or lowercase: every column name as its lowercase (configured keys included).
    column_names: Annotated[str, OneOf(COLUMN_NAME_MODES)] = "as-sent"
    keys: Annotated[
        dict[str, tuple[str, ...]],
        BeforeValidator(_keys),
        WithJsonSchema(
            {
                "type": "object",
                "additionalProperties": {
                    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
                },
            }
        ),
    ] = field(default_factory=dict)
    schedule: Schedule = None
    retries: Annotated[
        int, BeforeValidator(_retries), WithJsonSchema({"type": "integer", "minimum": 0})
    ] = 2
    # Landing times of files (replays): object_time, or {path_pattern: ...}.
    landed_at: Annotated[
        LandedAt,
        BeforeValidator(landed_at_section),
        WithJsonSchema(
            {
                "anyOf": [
                    {"enum": ["object_time"]},
                    {
                        "type": "object",
                        "properties": {"path_pattern": {"type": "string"}},
                        "additionalProperties": False,
                    },
                ]
            }
        ),
    ] = field(default_factory=LandedAt)
    # An Airflow AWS connection for an s3:// landing zone; resolved by the Airflow tasks.
    aws_conn_id: ConnectionId = None
    maintenance: MaintenanceConfig = field(default_factory=MaintenanceConfig)
    # How each target table is shaped and evolved: "*" (every table) or a table's name.
    table_options: Annotated[
        dict[str, dict[str, Any]], BeforeValidator(table_layers), WithJsonSchema(_LAYERS_SCHEMA)
    ] = field(default_factory=dict)
    # Every table's deletes, type_mapping and schema_changes, before table_options.
    deletes: DeleteMode = DEFAULTS.deletes
    type_mapping: TypeMapping = DEFAULTS.type_mapping
    schema_changes: SchemaChanges = field(default_factory=dict)
    # What the landed files are: JSON lines (default), or Avro or Parquet container files.
    file_format: Annotated[str, OneOf(FILE_FORMATS)] = "json"
    # When a batch fails its DAG run (lag, dead letters, rejected DDL), and who is notified.
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    # Format options (formats/options.py): a DataHub Tuple topic's columns, Aerospike's bins.
    columns: Annotated[dict[str, str] | None, _format_option("columns")] = None
    metadata_key: Annotated[str | None, _format_option("metadata_key")] = None
    no_set_table: Annotated[str | None, _format_option("no_set_table")] = None

    @field_validator("name")
    @classmethod
    def _named(cls, name: str) -> str:
        if not PIPELINE_NAME.match(name):
            raise ValueError("must match [a-z0-9_]+")
        return name

    @field_validator("landing")
    @classmethod
    def _uri(cls, landing: str) -> str:
        if not landing.startswith(("file://", "s3://")):
            raise ValueError(f"{landing!r} must be a file:// or s3:// URI")
        return landing.rstrip("/")

    @field_validator("table")
    @classmethod
    def _template(cls, table: str) -> str:
        for placeholder in re.findall(r"{([^}]*)}", table):
            if placeholder not in TEMPLATE_FIELDS:
                raise ValueError(
                    f"template {table!r} uses {{{placeholder}}}; "
                    f"allowed: {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}"
                )
        return table

    @field_validator("keys")
    @classmethod
    def _lowercase_keys(
        cls, keys: dict[str, tuple[str, ...]], info: pydantic.ValidationInfo
    ) -> dict[str, tuple[str, ...]]:
        if info.data.get("column_names") == "lowercase":
            return {table: tuple(c.lower() for c in columns) for table, columns in keys.items()}
        return keys

    @model_validator(mode="after")
    def _fits_its_format(self) -> PipelineConfig:
        if self.file_format != "json" and self.envelope != "none":
            raise ValueError(
                f"file_format {self.file_format} records are message values (their Kafka "
                "coordinates come from the file name): envelope must be none"
            )
        for option, formats in format_options().items():
            if getattr(self, option) is not None and self.format not in formats:
                raise ValueError(f"format {self.format!r} takes no option {option!r}")
        return self

    @functools.cached_property
    def tables(self) -> PipelineTableOptions:
        """The option layers of the pipeline's tables: its own, ``"*"``'s, then each table's."""
        wide = {key: getattr(self, key) for key in PIPELINE_WIDE}
        return PipelineTableOptions({"": wide, **self.table_options})

    @property
    def options(self) -> dict[str, Any]:
        """The options of the pipeline's format, defaults filled in."""
        given = {n: getattr(self, n) for n in format_options()}
        return option_values(self.format, given)

    def ignoring_schema_changes(self) -> PipelineConfig:
        """This pipeline with every table's schema kept as it is (``schema_changes: ignore``)."""
        layers = {
            table: {k: v for k, v in layer.items() if k != "schema_changes"}
            for table, layer in self.table_options.items()
        }
        return replace(self, schema_changes=parse_schema_changes("ignore"), table_options=layers)

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


def _pipelines(value: Any) -> Any:
    if not isinstance(value, list | tuple) or not value:
        raise ValueError("must be a non-empty list")
    return value


@pydantic.dataclasses.dataclass(frozen=True, config=SECTION)
class PipelinesFile:
    """The pipelines file: a catalog, the pipelines that feed it, how Spark runs them and
    whether they report lineage."""

    catalog: CatalogConfig
    pipelines: Annotated[tuple[PipelineConfig, ...], BeforeValidator(_pipelines)]
    spark: SparkConfig = field(default_factory=SparkConfig)
    # OpenLineage, off unless configured (true: the defaults).
    lineage: Annotated[
        LineageConfig | None,
        BeforeValidator(lineage_section),
        WithJsonSchema({"anyOf": [{"type": "boolean"}, json_schema(LineageConfig)]}),
    ] = None

    @field_validator("pipelines")
    @classmethod
    def _apart(cls, pipelines: tuple[PipelineConfig, ...]) -> tuple[PipelineConfig, ...]:
        names = [p.name for p in pipelines]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise LocatedError(f"pipeline names must be unique: {', '.join(duplicated)}")
        conflict = conflicting_designs(pipelines)
        if conflict:
            raise LocatedError(conflict)
        return pipelines


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


def file_schema() -> dict[str, Any]:
    """The pipelines file's JSON Schema (``cdc-ingest check --schema``), for editors."""
    schema = json_schema(PipelinesFile)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def load_config(path: str | Path) -> Config:
    """Read and validate a pipelines file.

    Args:
        path: the YAML file.

    Returns:
        The parsed configuration.

    Raises:
        ConfigError: with one line naming the file and what is wrong in it.
    """
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
        parsed = TypeAdapter(PipelinesFile).validate_python(raw)
    except ValidationError as exc:
        names = raw.get("pipelines") if isinstance(raw.get("pipelines"), list) else None
        raise ConfigError(f"{path}: {error_line(exc, file_schema(), '', names)}") from None
    return Config(path, parsed.catalog, parsed.pipelines, parsed.spark, parsed.lineage)
