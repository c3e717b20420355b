"""Spark frames to Arrow tables in the driver and back, without Python row objects.

A group of tables whose changes fit in the driver is classified by one job that collects its rows
as Arrow (``apply.groups``); pyiceberg writes them from there, and a write that Spark makes
reads them back as a local relation. A small batch's landed lines are read in the driver and
handed to Spark the same way (``landing.reader``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


def string_array(*values: str) -> pa.Array:
    """An Arrow array of the strings (a value set for ``pyarrow.compute.is_in``)."""
    import pyarrow as pa

    return pa.array(values, pa.string())


def collect_arrow(rows: DataFrame) -> pa.Table:
    """The rows in the driver as one Arrow table: one Spark job, no Python row objects."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from cdc_ingest import spark_jvm

    batches = spark_jvm.collect_arrow_batches(rows)
    if not batches:
        return to_arrow_schema(rows.schema).empty_table()
    return pa.Table.from_batches(batches)


def arrow_frame(spark: SparkSession, rows: pa.Table, ddl: str | None = None) -> DataFrame:
    """``rows`` as a Spark DataFrame, streamed to the JVM as Arrow batches, as
    ``createDataFrame`` streams a pandas frame's (PySpark 3.5 takes no Arrow table).

    ``ddl``: the frame's Spark schema where the caller knows it. PySpark's own conversion of an
    Arrow schema imports ``distutils``, which setuptools' shim answers by importing setuptools,
    a cost a cold run pays for nothing."""
    import pyarrow as pa

    from cdc_ingest import spark_jvm

    fields = [pa.field(f.name, small_offsets(f.type), f.nullable) for f in rows.schema]
    rows = rows.cast(pa.schema(fields)).combine_chunks()
    if ddl is None:
        from pyspark.sql.pandas.types import from_arrow_schema

        schema_json = from_arrow_schema(rows.schema).json()
    else:
        schema_json = spark_jvm.ddl_schema_json(spark, ddl)
    batches = rows.to_batches() or [pa.RecordBatch.from_pylist([], schema=rows.schema)]
    return spark_jvm.arrow_frame(spark, batches, schema_json)


def small_offsets(arrow_type: pa.DataType) -> pa.DataType:
    """The type with 32-bit offsets: pyiceberg reads strings, binaries and lists with 64-bit
    ones, which Spark 3.5's Arrow conversion does not take."""
    import pyarrow as pa

    if pa.types.is_large_string(arrow_type):
        return pa.string()
    if pa.types.is_large_binary(arrow_type):
        return pa.binary()
    if pa.types.is_large_list(arrow_type) or pa.types.is_list(arrow_type):
        return pa.list_(small_offsets(arrow_type.value_type))
    return arrow_type
