"""The steady bench's history scenarios (``history: scd2``, issue 53), run by bench_steady.py.

A third pipeline mirrors the same table into a namespace of its own with ``history: scd2``: its
mirror is seeded as the steady one is, and its history table with one version of every seeded
row, so that both tables hold the rows a long-running pipeline's would. Then:

- ``history``: the same 1M changes (a tenth with ``--quick``), against the steady mirror's batch
  without history measured in the same run (reported);
- ``hand SCD2``: the reference a user would write, Databricks' documented SCD type 2 MERGE
  (``bench_references.hand_scd2``) of the same changes into a copy of the history table as the
  batch found it, added to the batch without history: what the batch costs with the
  hand-written history in place of ours (reported); and ours against it (target 1.0x, issue 68:
  ours shares the batch's read of the changes and its classification, the hand job nothing);
- ``history 50 batches``: 50 micro-batches of 2,000 changes, the last 10 against the first 10
  (target 1.1x).
"""

from __future__ import annotations

from typing import Any

from scripts.benchmarks.bench_references import hand_scd2, write_properties
from scripts.benchmarks.bench_table import Shape

HISTORIED, HISTORIED_NAMESPACE = "historied", "shop_history"
# Batch ids and sources times of the seeded versions: as the seed's INSERT, before any batch.
SEED_START_MS = 1


def historied_pipeline(table: str, landing: str) -> dict[str, Any]:
    """The pipelines file's entry of the pipeline that keeps ``table``'s history."""
    return {
        "name": HISTORIED,
        "format": "debezium-json",
        "landing": landing,
        "namespace": HISTORIED_NAMESPACE,
        "keys": {table: ["id"]},
        "table_options": {table: {"history": "scd2"}},
    }


def seed_history(spark: Any, mirror: str, history: str) -> None:
    """One current version of each row the mirror holds that its history lacks (the rows the
    seed inserted past the pipeline)."""
    columns = [c for c in spark.table(mirror).columns if not c.startswith("_cdc_")]
    listed = ", ".join(f"m.`{c}`" for c in columns)
    spark.sql(
        f"INSERT INTO {history} SELECT {listed}, timestamp_millis({SEED_START_MS}), "
        "CAST(NULL AS TIMESTAMP), true, 'insert', m._cdc_batch_id, m._cdc_order, m._cdc_order "
        f"FROM {mirror} m LEFT ANTI JOIN {history} h ON h.id = m.id"
    )


def history_shapes(
    bench: Any, lines: list[str], expect: dict[str, int], without: float, total: int
) -> list[Shape]:
    """Seed the historied pipeline, then measure its batch and its micro-batches."""
    mirror = bench.mirror(HISTORIED)
    # Seeded before the warm-up batches, which then go through the history as well.
    bench.seed_mirror(
        HISTORIED, warm=total, seeded=lambda: seed_history(bench.spark, mirror, f"{mirror}_history")
    )
    # The history as the measured batch finds it, for the hand-written reference.
    catalog = mirror.split(".")[0]
    hand = f"{catalog}.hand.history_scd2"
    spark = bench.spark
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.hand")
    spark.sql(
        f"CREATE TABLE {hand} USING iceberg "
        f"TBLPROPERTIES ({write_properties(spark, f'{mirror}_history')}) "
        f"AS SELECT * FROM {mirror}_history"
    )
    kept = bench.run(lines, expect, HISTORIED)
    landing = bench.landing(HISTORIED) / f"batch-{bench.landed:03d}"
    _, hand_merge = hand_scd2(spark, landing, hand)
    spark.sql(f"DROP TABLE {hand}")
    spent = bench.micro_batches(total, 10_000_000, HISTORIED)
    first, last = sum(spent[:10]), sum(spent[-10:])
    return [
        Shape(
            "history",
            f"with history: {kept:.1f} s",
            f"without: {without:.1f} s",
            kept / without,
            0.0,
            ("reported", True),
        ),
        Shape(
            "hand SCD2",
            f"without + hand MERGE: {without + hand_merge:.1f} s",
            f"without: {without:.1f} s",
            (without + hand_merge) / without,
            0.0,
            ("reported", True),
        ),
        Shape(
            "history vs hand",
            f"with history: {kept:.1f} s",
            f"without + hand MERGE: {without + hand_merge:.1f} s",
            kept / (without + hand_merge),
            1.0,
        ),
        Shape(
            "history 50 batches",
            f"last 10: {last:.1f} s",
            f"first 10: {first:.1f} s",
            last / first,
            1.1,
        ),
    ]
