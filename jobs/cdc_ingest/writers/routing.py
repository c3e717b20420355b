"""Which writer a run's tables take: pyiceberg's over Spark's where pyiceberg writes the
catalog's kind and the run lets it (``WritePolicy.pyiceberg``), else Spark's alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cdc_ingest.catalog_commits import on_commit
from cdc_ingest.snapshots.arrow_catalog import arrow_catalog, writes_catalog
from cdc_ingest.writers.pyiceberg_writer import PyicebergWriter
from cdc_ingest.writers.spark_writer import SparkWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_ingest.catalog.config import CatalogConfig
    from cdc_ingest.writers.protocol import TableWriter


@contextmanager
def table_writer(
    spark: SparkSession, catalog: CatalogConfig, pyiceberg: bool = True
) -> Iterator[TableWriter]:
    """The run's writer for the block; a pyiceberg catalog it opens is closed when it ends."""
    by_spark = SparkWriter(spark, catalog.name)
    if not pyiceberg or not writes_catalog(catalog):
        yield by_spark
        return
    with arrow_catalog(catalog) as arrow:
        writer = PyicebergWriter(by_spark, arrow)
        forget = on_commit(writer.heard)
        try:
            yield writer
        finally:
            forget()
