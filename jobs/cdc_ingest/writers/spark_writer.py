"""Spark's writes of the batch's tables: SQL, DataFrames and Iceberg's Spark catalog."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from cdc_ingest.catalog_commits import append
from cdc_ingest.state.tables import (
    create_system_table,
    create_with_identifier,
    ensure_namespace,
    namespace_tables,
    table_columns,
    table_properties,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from cdc_ingest.writers.protocol import TableFacts, TableWriter


class SparkWriter:
    """Every write through the session's catalog ``catalog``: the writer of any catalog, and of
    any table pyiceberg does not write as Spark would."""

    appends_collected = False
    rewrites_small = False

    def __init__(self, spark: SparkSession, catalog: str) -> None:
        self.spark = spark
        self.catalog = catalog

    def by_spark(self) -> TableWriter:
        return self

    def ensure_namespace(self, namespace: str) -> None:
        ensure_namespace(self.spark, self.catalog, namespace)

    def table_names(self, namespace: str) -> set[str]:
        return namespace_tables(self.spark, self.catalog, namespace)

    def create_system_table(self, identifier: str, columns: str) -> None:
        create_system_table(self.spark, identifier, columns)

    def create_keyed(
        self,
        identifier: str,
        columns: dict[str, str],
        keys: tuple[str, ...],
        properties: dict[str, str],
        deferred: bool = False,
    ) -> bool | None:
        return create_with_identifier(self.spark, identifier, columns, keys, properties)

    def create_pending(self, identifier: str | None = None) -> None:
        """Spark creates no table later."""

    def created_together(self) -> AbstractContextManager[None]:
        return nullcontext()

    def append_rows(
        self, identifier: str, rows: list[dict[str, Any]], columns: str, properties: dict[str, str]
    ) -> None:
        # ``columns`` has commas only between columns (no struct or map types).
        names = [c.strip().split(" ")[0] for c in columns.split(",")]
        append(
            self.spark.createDataFrame([tuple(r.get(n) for n in names) for r in rows], columns)
            .writeTo(identifier)
            .options(**{f"snapshot-property.{k}": v for k, v in properties.items()})
        )

    def append_arrow(self, identifier: str, rows: pa.Table, properties: dict[str, str]) -> bool:
        return False  # a Spark job appends the table's frame

    def pipeline_rows(
        self, identifier: str, pipeline: str, fields: tuple[str, ...]
    ) -> list[dict[str, Any]]:
        from pyspark.sql import functions as F

        table = self.spark.table(identifier).where(F.col("pipeline") == pipeline)
        return [row.asDict() for row in table.select(*fields).collect()]

    def table_facts(self, identifier: str) -> TableFacts:
        return table_columns(self.spark, identifier), table_properties(self.spark, identifier)

    def rewritable(self, identifier: str, max_rows: int) -> bool:
        return False

    def read_columns(
        self, identifier: str, columns: list[str], max_rows: int
    ) -> tuple[int, pa.Table] | None:
        return None

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
        return False

    def rewritten_together(self) -> AbstractContextManager[set[str]]:
        return nullcontext(set())
