"""What a writer of the batch's Iceberg tables does, whichever library writes them."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

# A table's columns (name -> Spark SQL type, as Spark's schema spells them) and properties (as
# ``SHOW TBLPROPERTIES`` lists them).
TableFacts = tuple[dict[str, str], dict[str, str]]


class TableWriter(Protocol):
    """Creates the batch's tables, appends to them and rewrites them; reads what their
    preparation and classification compare.

    Capability flags say which of the optional routes a writer takes; a writer answers every
    call, declining (False or None, as documented) only where a method says so.
    """

    @property
    def appends_collected(self) -> bool:
        """A created table's rows are appended from Arrow collected in the driver
        (``append_arrow``)."""
        ...

    @property
    def rewrites_small(self) -> bool:
        """Small tables are read into the driver (``read_columns``) and rewritten whole
        (``replace_rows``) instead of merged."""
        ...

    def by_spark(self) -> TableWriter:
        """This writer as Spark alone writes: what a run with lineage writes its mirrors with
        (Spark's OpenLineage listener reports Spark's jobs only)."""
        ...

    def ensure_namespace(self, namespace: str) -> None:
        """Create the namespace if it does not exist yet."""
        ...

    def table_names(self, namespace: str) -> set[str]:
        """The names of the namespace's tables; none where it does not exist."""
        ...

    def create_system_table(self, identifier: str, columns: str) -> None:
        """Create one of the pipeline's ``_cdc_`` tables (``columns`` as Spark's DDL lists them)
        unless it exists."""
        ...

    def create_keyed(
        self,
        identifier: str,
        columns: dict[str, str],
        keys: tuple[str, ...],
        properties: dict[str, str],
        deferred: bool = False,
    ) -> bool | None:
        """Create an unpartitioned, unsorted table of ``columns`` (name -> Spark SQL type) with
        ``keys`` as its identifier fields, the default table properties and ``properties``: True
        if created, False if it exists already, None where only Spark's SQL makes it (the
        catalog is no Iceberg ``SparkCatalog``). ``deferred``: the table may be made by its first
        ``append_arrow`` or by ``create_pending``."""
        ...

    def create_pending(self, identifier: str | None = None) -> None:
        """Create the deferred table ``identifier`` (all of them without it) with no rows."""
        ...

    def created_together(self) -> AbstractContextManager[None]:
        """Deferred tables created in the block are registered together when it ends."""
        ...

    def append_rows(
        self, identifier: str, rows: list[dict[str, Any]], columns: str, properties: dict[str, str]
    ) -> None:
        """Append a few bookkeeping rows (dicts by column name; ``columns`` as Spark's DDL lists
        them) in one commit carrying ``properties``."""
        ...

    def append_arrow(self, identifier: str, rows: pa.Table, properties: dict[str, str]) -> bool:
        """Append a created table's collected rows in one commit carrying ``properties``; False,
        writing nothing, where the table is one this writer leaves to a Spark job."""
        ...

    def pipeline_rows(
        self, identifier: str, pipeline: str, fields: tuple[str, ...]
    ) -> list[dict[str, Any]]:
        """A pipeline's rows of a system table, their ``fields`` by name."""
        ...

    def table_facts(self, identifier: str) -> TableFacts:
        """An existing table's columns and properties."""
        ...

    def rewritable(self, identifier: str, max_rows: int) -> bool:
        """Whether a table is small enough, and written as Spark writes, to be rewritten whole."""
        ...

    def read_columns(
        self, identifier: str, columns: list[str], max_rows: int
    ) -> tuple[int, pa.Table] | None:
        """A rewritable table's snapshot and ``columns``; None where it is not rewritable."""
        ...

    def replace_rows(
        self,
        identifier: str,
        read_at: int | None,
        keys: tuple[str, ...],
        removed: pa.Table,
        added: pa.Table,
        properties: dict[str, str],
        max_rows: int,
        marks: pa.Table | None = None,
    ) -> bool:
        """Rewrite a table read by ``read_columns``; False, writing nothing, where it is to be
        merged instead (``ArrowCatalog.replace_rows`` says when)."""
        ...

    def rewritten_together(self) -> AbstractContextManager[set[str]]:
        """Rewrites made in the block are committed together when it ends; the set yielded then
        holds the tables another writer's commit left out, to be merged instead."""
        ...
