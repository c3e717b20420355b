"""pyiceberg's writes of the batch's tables (``snapshots/arrow_catalog``), with Spark's for
what pyiceberg does not write as Spark would."""

from __future__ import annotations

from contextlib import AbstractContextManager
from functools import cached_property
from typing import TYPE_CHECKING, Any

from cdc_ingest import spark_jvm
from cdc_ingest.state.tables import TABLE_PROPERTIES, column_types, unquoted

if TYPE_CHECKING:
    import pyarrow as pa

    from cdc_ingest.snapshots.arrow_catalog import ArrowCatalog
    from cdc_ingest.writers.protocol import TableFacts, TableWriter
    from cdc_ingest.writers.spark_writer import SparkWriter


class PyicebergWriter:
    """Creates, appends to and rewrites small plain tables through pyiceberg (no JVM round trip,
    no Spark job); ``spark`` writes the rest. Owns the pyiceberg catalog's caches of tables it
    loaded, read and created."""

    def __init__(self, spark: SparkWriter, arrow: ArrowCatalog) -> None:
        self.spark = spark
        self.arrow = arrow

    @property
    def appends_collected(self) -> bool:
        return self.arrow.available

    @property
    def rewrites_small(self) -> bool:
        return self.arrow.available

    @cached_property
    def _owner(self) -> str:
        """Spark's CREATE TABLE and CREATE NAMESPACE name the session's user as owner."""
        return spark_jvm.current_user(self.spark.spark)

    def by_spark(self) -> TableWriter:
        return self.spark

    def ensure_namespace(self, namespace: str) -> None:
        # A first run's Spark creates the catalog's SQLite database, which pyiceberg never does.
        if not self.arrow.ensure_namespace(namespace, self._owner):
            self.spark.ensure_namespace(namespace)

    def table_names(self, namespace: str) -> set[str]:
        listed = self.arrow.table_names(namespace)
        return listed if listed is not None else self.spark.table_names(namespace)

    def create_system_table(self, identifier: str, columns: str) -> None:
        stored = {"owner": self._owner, **TABLE_PROPERTIES}
        if self.arrow.create_keyed(identifier, column_types(columns), (), stored) is None:
            self.spark.create_system_table(identifier, columns)

    def create_keyed(
        self,
        identifier: str,
        columns: dict[str, str],
        keys: tuple[str, ...],
        properties: dict[str, str],
        deferred: bool = False,
    ) -> bool | None:
        stored = {"owner": self._owner, **TABLE_PROPERTIES, **properties}
        created = self.arrow.create_keyed(identifier, columns, keys, stored, deferred)
        if created is None:
            return self.spark.create_keyed(identifier, columns, keys, properties)
        return created

    def create_pending(self, identifier: str | None = None) -> None:
        self.arrow.create_pending(identifier)

    def created_together(self) -> AbstractContextManager[None]:
        return self.arrow.created_together()

    def append_rows(
        self, identifier: str, rows: list[dict[str, Any]], columns: str, properties: dict[str, str]
    ) -> None:
        if not self.arrow.append(identifier, rows, properties):
            self.spark.append_rows(identifier, rows, columns, properties)

    def append_arrow(self, identifier: str, rows: pa.Table, properties: dict[str, str]) -> bool:
        return self.arrow.append(identifier, rows, properties)

    def pipeline_rows(
        self, identifier: str, pipeline: str, fields: tuple[str, ...]
    ) -> list[dict[str, Any]]:
        from cdc_ingest.state.lake import pipeline_rows
        from cdc_ingest.state.warehouse_errors import warehouse_failures

        catalog = self.arrow.opened()
        if catalog is not None:
            _, namespace, table = unquoted(identifier)
            with warehouse_failures(f"pyiceberg scan of {namespace}.{table}"):
                scanned = pipeline_rows(catalog, namespace, table, pipeline, fields)
            if scanned is not None:
                return scanned
        return self.spark.pipeline_rows(identifier, pipeline, fields)

    def table_facts(self, identifier: str) -> TableFacts:
        facts = self.arrow.table_facts(identifier)
        return facts if facts is not None else self.spark.table_facts(identifier)

    def heard(self, what: str, altered: str | None) -> None:
        """A commit hook (``catalog_commits``): forget what is kept of a table whose schema or
        design Spark changed, so that the next read loads it again."""
        if altered is not None:
            self.arrow.altered(altered)

    def rewritable(self, identifier: str, max_rows: int) -> bool:
        return self.arrow.rewritable(identifier, max_rows)

    def read_columns(
        self, identifier: str, columns: list[str], max_rows: int
    ) -> tuple[int, pa.Table] | None:
        return self.arrow.read_columns(identifier, columns, max_rows)

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
        return self.arrow.replace_rows(
            identifier, read_at, keys, removed, added, properties, max_rows, marks
        )

    def rewritten_together(self) -> AbstractContextManager[set[str]]:
        return self.arrow.rewritten_together()
