"""What a mirror costs to read, for ``bench_steady.py``'s "reads" scenarios: 10 warm full scans
(``count`` and a ``sum`` of a column) and 100 point lookups by key, through Spark and through
pyiceberg, each in CPU seconds of the bench's process tree, after an uncounted warm-up of its own
(a scan; a few lookups, by other keys).

Measured on the mirror after the 50 micro-batches (each leaving position-delete files until
``maintain`` runs) and again right after ``maintain``: the ratio is what the micro-batches' debt
costs a reader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scripts.benchmarks.bench_phases import tree_cpu_seconds
from scripts.benchmarks.bench_table import Shape

if TYPE_CHECKING:
    from cdc_ingest.catalog.config import CatalogConfig
    from pyspark.sql import SparkSession

LOOKUPS = 100
# Full scans counted: one costs less than the measurement's own spread (docs/performance.md).
SCANS = 10
# pyiceberg's lookups into a variant mirror (reported, no target): a fifth, scaled, since one
# into a file carrying deletes reads all of it (8 CPU-s at 10M rows, docs/performance.md).
VARIANT_PYICEBERG_LOOKUPS = 20
# Lookups of the uncounted warm-up: enough to compile Spark's code and load the table's metadata
# as a warm reader has them; a whole uncounted round doubled the bench's longest reads.
WARM_UP_LOOKUPS = 10
# pyiceberg compiles nothing: its warm-up only loads the table's manifests.
PYICEBERG_WARM_UP = 2
TARGET = 1.3
# The other ways a mirror could take the same micro-batches: (pipeline, namespace, label, the
# table properties that make it so). Each is reported against the merge-on-read v2 mirror.
VARIANTS = (
    (
        "steady_cow",
        "shop_cow",
        "copy-on-write",
        {
            "write.merge.mode": "copy-on-write",
            "write.update.mode": "copy-on-write",
            "write.delete.mode": "copy-on-write",
        },
    ),
    ("steady_v3", "shop_v3", "format v3", {"format-version": "3"}),
)


@dataclass(frozen=True)
class ReadCosts:
    """CPU seconds of ``SCANS`` full scans and of ``LOOKUPS`` point lookups, by engine; the table's
    position-delete and data files when measured."""

    scan: float
    spark_lookups: float
    pyiceberg_lookups: float
    delete_files: int
    data_files: int


def read_costs(
    spark: SparkSession,
    catalog: CatalogConfig,
    table: str,
    key: str,
    column: str,
    rows: int,
    pyiceberg_keys: int = LOOKUPS,
) -> ReadCosts:
    """The costs of reading ``table`` (``catalog.namespace.table``) as it is now: its keys
    ``key`` spread over ``0 .. rows``, ``column`` the summed one. ``pyiceberg_keys``: about how
    many of the lookups pyiceberg makes (every n-th key), its cost scaled to ``LOOKUPS`` (each
    reads a whole data file that carries deletes: the same cost for every key)."""
    from cdc_ingest.state.lake import open_catalog
    from pyiceberg.expressions import EqualTo

    spark.sql(f"REFRESH TABLE {table}")
    step = max(1, rows // LOOKUPS)
    keys = list(range(0, rows, step))[:LOOKUPS]
    warm_up_keys = list(range(step // 2, rows, step))[:WARM_UP_LOOKUPS]
    pyiceberg_picked = keys[:: max(1, LOOKUPS // pyiceberg_keys)]

    def scan(warm_up: bool = False) -> None:
        for _ in range(1 if warm_up else SCANS):
            spark.sql(f"SELECT count(*), sum({column}) FROM {table}").collect()

    def spark_lookups(warm_up: bool = False) -> None:
        for value in warm_up_keys if warm_up else keys:
            spark.sql(f"SELECT * FROM {table} WHERE {key} = {value}").collect()

    _, namespace, name = table.split(".")
    loaded = open_catalog(catalog).load_table((namespace, name))

    def pyiceberg_lookups(warm_up: bool = False) -> None:
        for value in warm_up_keys[:PYICEBERG_WARM_UP] if warm_up else pyiceberg_picked:
            equal = EqualTo(key, value)  # type: ignore[call-arg, arg-type]  # a pydantic init
            loaded.scan(row_filter=equal).to_arrow()

    costs = []
    for read in (scan, spark_lookups, pyiceberg_lookups):
        read(warm_up=True)  # uncounted
        cpu = tree_cpu_seconds()
        read()
        costs.append(tree_cpu_seconds() - cpu)
    deletes = spark.sql(f"SELECT * FROM {table}.delete_files").count()
    data = spark.sql(f"SELECT * FROM {table}.data_files").count()
    return ReadCosts(
        costs[0], costs[1], costs[2] * len(keys) / len(pyiceberg_picked), deletes, data
    )


def read_shapes(piled: ReadCosts, maintained: ReadCosts) -> list[Shape]:
    """The reads after the micro-batches against the same after ``maintain``."""
    files = (
        f"{piled.delete_files} delete files on {piled.data_files} data files, then "
        f"{maintained.delete_files} on {maintained.data_files}"
    )
    print(f"reads: {files}")
    measured = (
        ("reads: scan", f"{SCANS} x count + sum", piled.scan, maintained.scan),
        (
            "reads: Spark by key",
            f"{LOOKUPS} lookups",
            piled.spark_lookups,
            maintained.spark_lookups,
        ),
        (
            "reads: pyiceberg key",
            f"{LOOKUPS} lookups",
            piled.pyiceberg_lookups,
            maintained.pyiceberg_lookups,
        ),
    )
    return [
        Shape(
            label,
            f"{what} after 50 batches: {before:.1f} s",
            f"after maintain: {after:.1f} s",
            before / after,
            TARGET,
        )
        for label, what, before, after in measured
    ]


def variant_shapes(
    label: str, spent: float, merged: float, costs: ReadCosts, piled: ReadCosts
) -> list[Shape]:
    """A variant mirror's 50 batches and reads against the merge-on-read v2 mirror's
    (``merged``, ``piled``): reported, no target."""
    print(f"reads ({label}): {costs.delete_files} delete files on {costs.data_files} data files")
    measured = (
        ("50 batches", spent, merged),
        ("scan", costs.scan, piled.scan),
        ("Spark by key", costs.spark_lookups, piled.spark_lookups),
        ("pyiceberg key", costs.pyiceberg_lookups, piled.pyiceberg_lookups),
    )
    return [
        Shape(
            f"{label}: {what}",
            f"{label}: {mine:.1f} s",
            f"merge-on-read v2: {theirs:.1f} s",
            mine / theirs,
            0.0,
            ("reported", True),
        )
        for what, mine, theirs in measured
    ]
