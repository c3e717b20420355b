"""Several tables' Spark writes at once, over the run's one Spark session.

A table's MERGE is a few Spark jobs whose driver work (planning, Iceberg's scan planning and
commit) leaves the executors idle, and whose small last stages leave cores idle; writes of other
tables fill them: writes at once take less wall time than one after another, for no more CPU
(docs/performance.md, "Decisions"). Each write stays a commit of its own table, with its counts
(``commit_notes`` keeps them per thread), and a refusal of one table stays that table's. Each
writer runs its jobs in a scheduler pool of its own (``cdc-ingest-writer-0`` to ``-3``): Spark's
default FIFO scheduler ignores pools and runs the jobs first come, first served; where a
pipelines file sets ``spark.scheduler.mode: FAIR``, it shares the cores between the pools (which
an allocation file may weigh), so that a large table's MERGE does not hold the others' back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from cdc_ingest import spark_jvm
from cdc_ingest.stages import stage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Tables written at once, at most: past a few, their jobs only queue for the same cores.
WRITERS = 4
POOL_PROPERTY = "spark.scheduler.pool"
# Held by a write into the namespace's one ``_cdc_tombstones`` table: writes at once commit to it
# one at a time, or a MERGE into it could fail Iceberg's validation against another's append.
TOMBSTONE_WRITES = threading.Lock()

Table = TypeVar("Table")


def write_each(
    spark: SparkSession,
    tables: Sequence[Table],
    write: Callable[[Table], None],
    name: Callable[[Table], str],
    refused: tuple[type[Exception], ...],
) -> dict[str, Exception]:
    """``write`` each of ``tables``, up to ``WRITERS`` at once; returns the ``refused``
    exceptions by table ``name``. Any other exception (the catalog's, the engine's) is raised once
    every write has ended, so that no write is still running when the batch fails.

    Stages opened by the writes are not recorded (a stage is timed in the thread that records
    them): writes at once are timed together as ``write tables at once``.
    """
    refusals: dict[str, Exception] = {}
    if len(tables) < 2:
        for table in tables:
            try:
                write(table)
            except refused as exc:
                refusals[name(table)] = exc
        return refusals
    inherited = spark_jvm.LocalProperties(spark)
    slots = threading.local()
    taken = iter(range(WRITERS))
    lock = threading.Lock()

    def pooled(table: Table) -> None:
        if not hasattr(slots, "pool"):
            with lock:
                slots.pool = f"cdc-ingest-writer-{next(taken)}"
        # Spark's FIFO scheduler ignores the pool.
        inherited.install({POOL_PROPERTY: slots.pool})
        write(table)

    failures: list[BaseException] = []
    with stage("write tables at once"), ThreadPoolExecutor(min(WRITERS, len(tables))) as pool:
        futures = {name(table): pool.submit(pooled, table) for table in tables}
    for table_name, future in futures.items():
        error = future.exception()
        if isinstance(error, refused):
            refusals[table_name] = error
        elif error is not None:
            failures.append(error)
    if failures:
        raise failures[0]
    return refusals
