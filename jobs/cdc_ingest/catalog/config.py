"""The pipelines file's ``catalog`` section: which catalog, where its warehouse lives, its secrets.

Loaded by :mod:`cdc_ingest.config`, which reports its errors as the file's; the properties both
engines open the catalog with are derived in :mod:`cdc_ingest.catalog.properties`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CatalogConfigError(ValueError):
    """The catalog section is missing, malformed or holds a secret."""


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
        raise CatalogConfigError(
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


def _required(mapping: dict[str, Any], key: str, where: str) -> Any:
    if key not in mapping or mapping[key] in (None, ""):
        raise CatalogConfigError(f"{where}: missing required key {key!r}")
    return mapping[key]


def _optional_id(raw: dict[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise CatalogConfigError(f"{where}: {key} must be an Airflow connection id (a string)")
    return value


def parse_catalog(raw: Any, path: Path) -> CatalogConfig:
    """The pipelines file's ``catalog`` section.

    Raises:
        CatalogConfigError: one line naming the file and the offending key.
    """
    where = f"{path}: catalog"
    if not isinstance(raw, dict):
        raise CatalogConfigError(f"{path}: missing 'catalog' mapping (uri, warehouse)")
    unknown = sorted(str(k) for k in raw if k not in CATALOG_KEYS)
    if unknown:
        raise CatalogConfigError(
            f"{where}: unknown key {unknown[0]!r} (catalog keys: {', '.join(CATALOG_KEYS)})"
        )
    kind = str(raw.get("type", "jdbc"))
    if kind not in CATALOG_TYPES:
        raise CatalogConfigError(
            f"{where}: type {kind!r} must be one of {', '.join(CATALOG_TYPES)}"
        )
    properties = raw.get("properties") or {}
    if not isinstance(properties, dict):
        raise CatalogConfigError(
            f"{where}.properties: expected a mapping of Iceberg catalog properties"
        )
    secrets = sorted(str(k) for k in properties if is_secret(str(k)))
    if secrets:
        raise CatalogConfigError(
            f"{where}.properties: {secrets[0]!r} is a secret; give it through catalog.conn_id "
            "or a PYICEBERG_CATALOG__<NAME>__<KEY> variable, never in the pipelines file"
        )
    uri_required = kind in ("jdbc", "rest", "hive")
    catalog = CatalogConfig(
        name=str(raw.get("name", "lake")),
        uri=str(_required(raw, "uri", where) if uri_required else raw.get("uri") or ""),
        warehouse=str(
            _required(raw, "warehouse", where) if kind != "rest" else raw.get("warehouse") or ""
        ),
        type=kind,
        properties={str(k): str(v) for k, v in properties.items()},
        conn_id=_optional_id(raw, "conn_id", where),
        aws_conn_id=_optional_id(raw, "aws_conn_id", where),
    )
    if not IDENTIFIER.match(catalog.name):
        raise CatalogConfigError(f"{path}: catalog.name {catalog.name!r} is not a valid identifier")
    if kind == "jdbc":
        try:
            _ = catalog.jdbc_url
        except CatalogConfigError as exc:
            raise CatalogConfigError(f"{path}: {exc}") from None
    # A REST server may name its warehouses; every other kind takes a location.
    warehouse = catalog.warehouse
    if kind != "rest" and warehouse and not warehouse.startswith(("file://", "s3://", "s3a://")):
        raise CatalogConfigError(
            f"{where}: warehouse {catalog.warehouse!r} must be a file:// or s3:// URI"
        )
    return catalog
