"""What a user would run instead of cdc-ingest, timed on the same changes (``bench_steady``).

Each returns the CPU seconds of the whole process tree: a parse-only baseline, a hand-written Spark
job (parse, newest change per key, one ``MERGE INTO``, with or without comparing each change's
time with its row's) over tables ``seed_hand_tables`` makes, and pyiceberg's ``Table.upsert``.
The changes are Debezium messages of an ``(id, v, note)`` table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts.benchmarks.bench_phases import tree_cpu_seconds

if TYPE_CHECKING:
    from cdc_ingest.config import CatalogConfig
    from pyspark.sql import DataFrame, SparkSession

PARSE_SCHEMA = (
    "op string, ts_ms bigint, before struct<id bigint, v bigint, note string>, "
    "after struct<id bigint, v bigint, note string>, source map<string,string>"
)


def parse_baseline(spark: SparkSession, landing: Path) -> float:
    """CPU seconds to read and fully parse every line of ``landing``."""
    from pyspark.sql import functions as F

    cpu = tree_cpu_seconds()
    parsed = F.from_json("value", PARSE_SCHEMA)
    (
        spark.read.text(str(landing))
        .select(parsed.alias("m"))
        .groupBy("m.op")
        .agg(F.count(F.lit(1)), F.max("m.ts_ms"), F.sum("m.after.v"), F.sum("m.before.v"))
        .collect()
    )
    return tree_cpu_seconds() - cpu


def seed_hand_tables(spark: SparkSession, mirror: str, name: str) -> dict[tuple[bool, bool], str]:
    """Plain Iceberg tables holding ``mirror``'s rows, with its write properties, for
    ``hand_merge``: one per (guarded, warm-up), named ``name`` plus ``_guarded`` and ``_warm``. A
    guarded one has a ``ts`` column, 0 in every row: older than every change."""
    listed = write_properties(spark, mirror)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name.rsplit('.', 1)[0]}")
    tables: dict[tuple[bool, bool], str] = {}
    for guarded in (False, True):
        for warm_up in (False, True):
            table = name + ("_guarded" if guarded else "") + ("_warm" if warm_up else "")
            ts = ", ts bigint" if guarded else ""
            spark.sql(
                f"CREATE TABLE {table} (id bigint, v bigint, note string{ts}) USING iceberg "
                f"TBLPROPERTIES ({listed})"
            )
            zero = ", 0L" if guarded else ""
            spark.sql(f"INSERT INTO {table} SELECT id, v, note{zero} FROM {mirror}")
            tables[guarded, warm_up] = table
    return tables


def hand_merge(spark: SparkSession, landing: Path, table: str, guarded: bool = False) -> float:
    """CPU seconds of the job a user would write: parse, newest per key, one MERGE. ``guarded``:
    the MERGE applies a change only where it is newer than the row (``table`` then has a ``ts``
    column, the source time of the change that wrote each row), as a user who needs changes
    arriving late not to overwrite newer ones would write it (no tombstones: a late insert of a
    deleted key still comes back)."""
    cpu = tree_cpu_seconds()
    _newest_changes(spark, landing).createOrReplaceTempView("hand_changes")
    newer = " AND s.ts > t.ts" if guarded else ""
    columns = ["id", "v", "note", *(["ts"] if guarded else [])]
    sets = ", ".join(f"{c} = s.{c}" for c in columns[1:])
    values = ", ".join(f"s.{c}" for c in columns)
    spark.sql(
        f"MERGE INTO {table} t USING hand_changes s ON t.id = s.id "
        f"WHEN MATCHED AND s.op = 'd'{newer} THEN DELETE "
        f"WHEN MATCHED{newer} THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND s.op != 'd' THEN INSERT ({', '.join(columns)}) VALUES ({values})"
    )
    return tree_cpu_seconds() - cpu


def pyiceberg_upsert(
    catalog_config: CatalogConfig, name: str, rows: int, lines: list[str]
) -> float:
    """CPU seconds of pyiceberg's upsert (and delete) of ``lines`` into a new table ``name``
    (``namespace.table``) of ``rows`` rows."""
    import pyarrow as pa
    from cdc_ingest.state.lake import open_catalog
    from pyiceberg.expressions import In
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    catalog = open_catalog(catalog_config)
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "v", LongType(), required=False),
        NestedField(3, "note", StringType(), required=False),
        identifier_field_ids=[1],
    )
    table = catalog.create_table(name, schema)
    arrow_schema = schema.as_arrow()
    ids = pa.array(range(rows), pa.int64())
    table.append(
        pa.Table.from_arrays(
            [ids, pa.array([0] * rows, pa.int64()), pa.array([f"n{i}" for i in range(rows)])],
            schema=arrow_schema,
        )
    )
    cpu = tree_cpu_seconds()
    newest: dict[int, dict[str, Any]] = {}
    for line in lines:
        message = json.loads(line)
        image = message["after"] or message["before"]
        newest[image["id"]] = {"op": message["op"], **image}
    kept = [r for r in newest.values() if r["op"] != "d"]
    gone = [r["id"] for r in newest.values() if r["op"] == "d"]
    table.upsert(
        pa.Table.from_pylist(
            [{"id": r["id"], "v": r["v"], "note": r["note"]} for r in kept], schema=arrow_schema
        )
    )
    table.delete(In("id", gone))  # type: ignore[call-arg, arg-type]  # a pydantic init
    return tree_cpu_seconds() - cpu


def hand_scd2(
    spark: SparkSession, landing: Path, history: str, split: bool = False
) -> tuple[float, float]:
    """CPU seconds of the SCD type 2 job a user would write over ``history`` (a history table
    of the ``(id, v, note)`` table, as ``history: scd2`` keeps it), and of its MERGE alone: parse,
    newest change per key, then the MERGE of Databricks' documented SCD type 2 pattern (each
    change twice, once keyed to close the key's current version, once with a null key to insert
    the version it opens). It does less than ``history: scd2``: no late events (every change is
    taken to be newer than every version held), no replays, a version's op is the change's.
    ``split``: in two commits instead, a MERGE that only closes current versions (an inner
    join), then an append of the new versions."""
    cpu = tree_cpu_seconds()
    _newest_changes(spark, landing).localCheckpoint().createOrReplaceTempView("hand_scd2_changes")
    merge_cpu = tree_cpu_seconds()
    start, order = "timestamp_millis(s.ts)", "unhex(lpad(hex(s.ts), 16, '0'))"
    close = f"UPDATE SET _cdc_valid_to = {start}, _cdc_current = false"
    # The version a change opens.
    columns = (
        "id, v, note, _cdc_valid_from, _cdc_valid_to, _cdc_current, _cdc_op, _cdc_batch_id, "
        "_cdc_order, _cdc_last_order"
    )
    version = (
        f"s.id, s.v, s.note, {start}, CASE WHEN s.op = 'd' THEN {start} END, s.op != 'd', "
        "CASE s.op WHEN 'c' THEN 'insert' WHEN 'd' THEN 'delete' ELSE 'update' END, 0L, "
        f"{order}, {order}"
    )
    if split:
        spark.sql(
            f"MERGE INTO {history} t USING hand_scd2_changes s ON t.id = s.id AND t._cdc_current "
            f"WHEN MATCHED THEN {close}"
        )
        spark.sql(f"INSERT INTO {history} ({columns}) SELECT {version} FROM hand_scd2_changes s")
    else:
        spark.sql(
            f"MERGE INTO {history} t USING ("
            "SELECT id AS merge_key, * FROM hand_scd2_changes "
            "UNION ALL SELECT CAST(NULL AS BIGINT) AS merge_key, * FROM hand_scd2_changes"
            f") s ON t.id = s.merge_key AND t._cdc_current WHEN MATCHED THEN {close} "
            f"WHEN NOT MATCHED AND s.merge_key IS NULL THEN INSERT ({columns}) VALUES ({version})"
        )
    done = tree_cpu_seconds()
    return done - cpu, done - merge_cpu


def _newest_changes(spark: SparkSession, landing: Path) -> DataFrame:
    """The changes of ``landing``, parsed, the newest of each key only (``id, v, note, op, ts``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    m = F.from_json("value", PARSE_SCHEMA).alias("m")
    parsed = (
        spark.read.text(str(landing))
        .select(m)
        .select(
            F.coalesce("m.after.id", "m.before.id").alias("id"),
            F.col("m.after.v").alias("v"),
            F.col("m.after.note").alias("note"),
            F.col("m.op").alias("op"),
            F.col("m.ts_ms").alias("ts"),
        )
    )
    newest = Window.partitionBy("id").orderBy(F.col("ts").desc())
    return parsed.withColumn("_n", F.row_number().over(newest)).where("_n = 1").drop("_n")


def write_properties(spark: SparkSession, table: str) -> str:
    """``table``'s write properties (``write.*``, ``format-version``) as a ``TBLPROPERTIES``
    list, for a copy that writes as it does."""
    return ", ".join(
        f"'{r['key']}' = '{r['value']}'"
        for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()
        if r["key"].startswith("write.") or r["key"] == "format-version"
    )
