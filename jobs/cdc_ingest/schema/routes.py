"""Routes: many source tables (shards) into one mirror, as Flink CDC's ``route`` and Paimon's
database sync.

A pipeline's ``routes:`` are tried in order; the first whose ``source`` (a regular expression)
matches a message's ``{db}.{table}`` whole (``{schema}`` standing in for ``{db}`` where a format
names no database; the bare table where it names neither) sends the message to the route's
``table``. Messages no route matches keep the pipeline's ``table`` template. Every routed row
carries its shard's names in two string columns (``_cdc_source_db``, ``_cdc_source_table`` unless
the route names them; the database is empty where the format names none), which lead the key
with ``key_with_source`` (shards that reuse keys). Written as SQL text over a decoded frame's
``src_db``, ``src_schema`` and ``src_table``, so that rows and the statements the driver places
get the same names. This module imports no pyspark: Airflow loads configs at DAG parse time.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated

from pydantic import Strict, field_validator, model_validator
from pydantic.dataclasses import dataclass

from cdc_ingest import sql_text
from cdc_ingest.config_model import SECTION, regular_expression
from cdc_ingest.contract import ColumnType
from cdc_ingest.schema.ddl_parse import SchemaChange

DB_COLUMN, TABLE_COLUMN = "_cdc_source_db", "_cdc_source_table"
# The name a route's source pattern is matched against.
SOURCE_PATH = "concat_ws('.', coalesce(src_db, src_schema), src_table)"
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, config=SECTION)
class Route:
    """Source tables matched by ``source`` (a regular expression over ``{db}.{table}``) into one
    target ``table``."""

    source: str
    table: str
    key_with_source: Annotated[bool, Strict()] = False
    db_column: str = DB_COLUMN
    table_column: str = TABLE_COLUMN

    @field_validator("source")
    @classmethod
    def _pattern(cls, source: str) -> str:
        return regular_expression(source, "a regular expression over {db}.{table}")

    @field_validator("table")
    @classmethod
    def _target(cls, table: str) -> str:
        if not re.fullmatch(r"[a-z0-9_]+", table):
            raise ValueError("must be a target table name ([a-z0-9_]+)")
        if table.startswith("_cdc_"):
            raise ValueError(f"{table!r}: names beginning with _cdc_ are the job's own")
        return table

    @field_validator("db_column", "table_column")
    @classmethod
    def _column(cls, name: str) -> str:
        if not _COLUMN.match(name):
            raise ValueError("must be a column name (letters, digits, _)")
        return name

    @model_validator(mode="after")
    def _two_columns(self) -> Route:
        if self.db_column == self.table_column:
            raise ValueError("db_column and table_column must differ")
        return self

    @property
    def columns(self) -> tuple[str, str]:
        """The columns of a routed row that name its shard: database, then table."""
        return (self.db_column, self.table_column)

    @property
    def matched(self) -> str:
        """SQL text: whether a decoded row's source is one of this route's."""
        return f"coalesce({SOURCE_PATH} RLIKE {sql_text.literal(f'^(?:{self.source})$')}, false)"


def routed_target(template_sql: str, routes: tuple[Route, ...]) -> str:
    """SQL text: a decoded row's target table, the first matching route's or the template's
    (``template_sql``, as ``names.target_name`` renders it)."""
    if not routes:
        return template_sql
    cases = " ".join(f"WHEN {r.matched} THEN {sql_text.literal(r.table)}" for r in routes)
    return f"CASE {cases} ELSE {template_sql} END"


def with_source_names(image: str, routes: tuple[Route, ...]) -> str:
    """SQL text: a row image (a map of column to text) with its shard's names added where a
    route takes the row, else as it is."""
    if not routes:
        return image
    cases = []
    for route in routes:
        db, table = (sql_text.literal(c) for c in route.columns)
        # A format that names no database gives an empty one: the column may be part of a key.
        names = f"map({db}, coalesce(src_db, src_schema, ''), {table}, src_table)"
        cases.append(f"WHEN {route.matched} THEN map_concat({image}, {names})")
    return f"CASE WHEN {image} IS NULL THEN NULL {' '.join(cases)} ELSE {image} END"


def keys_with_source(keys: str, routes: tuple[Route, ...]) -> str:
    """SQL text: a row's key columns (``keys``, an array of names), with its route's shard
    columns in front where the route says ``key_with_source``."""
    keyed = [r for r in routes if r.key_with_source]
    if not keyed:
        return keys
    cases = []
    for route in routes:
        if route.key_with_source:
            shard = ", ".join(sql_text.literal(c) for c in route.columns)
            cases.append(f"WHEN {route.matched} THEN concat(array({shard}), {keys})")
        else:
            cases.append(f"WHEN {route.matched} THEN {keys}")
    return f"CASE {' '.join(cases)} ELSE {keys} END"


def routed_columns(routes: tuple[Route, ...]) -> frozenset[str]:
    """Every column routes add to rows: the job's own names a source column may not take, which
    routed rows do."""
    return frozenset(c for r in routes for c in r.columns)


def routed_creation(change: SchemaChange, route: Route) -> SchemaChange:
    """A shard's CREATE TABLE as the routed table's: with the shard's columns, which join the
    key with ``key_with_source``."""
    columns = {**change.columns, **{c: ColumnType("string") for c in route.columns}}
    keys = (*route.columns, *change.keys) if route.key_with_source and change.keys else change.keys
    return dataclasses.replace(change, columns=columns, keys=keys)
