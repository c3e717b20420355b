"""The pipelines file's ``catalog`` section: which catalog, where its warehouse lives, its secrets.

Loaded by :mod:`cdc_ingest.config`, which reports its errors as the file's; the properties both
engines open the catalog with are derived in :mod:`cdc_ingest.catalog.properties`.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import Annotated, Any
from urllib.parse import quote, unquote

from pydantic import AfterValidator, field_validator, model_validator
from pydantic.dataclasses import dataclass

from cdc_ingest.config_model import SECTION, ConnectionId, OneOf

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CatalogConfigError(ValueError):
    """The catalog section is missing, malformed or holds a secret."""


CATALOG_TYPES = ("jdbc", "rest", "glue", "hive")
# A catalog property whose key contains one of these holds a secret: never printed, never logged.
SECRET_WORDS = ("password", "secret", "credential", "token", "session")
_USERINFO = re.compile(r"^(postgresql(?:\+\w+)?://)(?:[^:@/]+(?::[^@/]*)?@)?(.+)$")


def is_secret(key: str) -> bool:
    """Whether catalog property ``key`` holds a secret."""
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS)


def identifier(name: str) -> str:
    """A catalog's or a namespace's name, as Spark and pyiceberg both take it unquoted."""
    if not IDENTIFIER.match(name):
        raise ValueError(f"{name!r} is not a valid identifier")
    return name


Identifier = Annotated[str, AfterValidator(identifier)]


def text_values(value: Any) -> Any:
    """A mapping of settings with every value as text (YAML reads ``true`` and ``16`` as others)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        return value
    return {str(k): str(v) for k, v in value.items()}


@dataclass(frozen=True, config=SECTION)
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

    name: Identifier = "lake"
    uri: str = ""
    warehouse: str = ""
    type: Annotated[str, OneOf(CATALOG_TYPES)] = "jdbc"
    properties: dict[str, str] = field(default_factory=dict)
    conn_id: ConnectionId = None
    aws_conn_id: ConnectionId = None

    @field_validator("uri", "warehouse", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("properties", mode="before")
    @classmethod
    def _no_secrets(cls, value: Any) -> Any:
        value = text_values(value)
        secrets = sorted(k for k in value if is_secret(k)) if isinstance(value, dict) else []
        if secrets:
            raise ValueError(
                f"{secrets[0]!r} is a secret; give it through catalog.conn_id or a "
                "PYICEBERG_CATALOG__<NAME>__<KEY> variable, never in the pipelines file"
            )
        return value

    @model_validator(mode="after")
    def _located(self) -> CatalogConfig:
        if self.type in ("jdbc", "rest", "hive") and not self.uri:
            raise ValueError("missing required key 'uri'")
        if self.type != "rest" and not self.warehouse:
            raise ValueError("missing required key 'warehouse'")
        if self.type == "jdbc":
            _ = self.jdbc_url
        # A REST server may name its warehouses; every other kind takes a location.
        located = self.warehouse.startswith(("file://", "s3://", "s3a://"))
        if self.type != "rest" and not located:
            raise ValueError(f"warehouse {self.warehouse!r} must be a file:// or s3:// URI")
        return self

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
