"""Many changes into a larger mirror: a bloom filter of the changes' keys keeps the table's other
rows out of the MERGE's join.

A ``MERGE INTO`` with a ``WHEN NOT MATCHED`` clause is an outer join with the changes on the
preserved side, so Spark cannot broadcast them: it shuffles and sorts every row of the table
(its key, file and position) to meet them. Spark's runtime filter (``InjectRuntimeFilter``) can
put a bloom filter of the changes' keys on the table's side of that join, below the shuffle, but
it never did here: the changes are the classification's local checkpoint, whose plan carries the
estimate of the join it came from (2e27 bytes for 1M changes into 10M rows), far over the
filter's limit on its source (10 MB by default); and the table's scan must be over another limit
(10 GB). So the MERGE reads the checkpoint's rows under a plan of their own (``unestimated``),
and the statement is planned with both limits lifted and the filter sized for the changes
(``bloom_filtered``), only where the table is much larger than the changes: Spark then computes
the filter from the changes in a small job of its own and applies it while reading the table.
The same holds for the MERGE into ``_cdc_tombstones``, which keeps the tombstone of every delete
ever applied (``keyed_writes.merge_tombstones``). The MERGE then reads far fewer rows.
The filter only drops rows whose keys no change has (a bloom filter has false positives, not
false negatives), so the MERGE's result is the same.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc_ingest import spark_jvm

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# The filter pays where the table holds at least this many times as many rows as the changes
# merged: each of the table's rows is then hashed and probed, and each one it drops is not
# shuffled and sorted (the filter costs far less per row than what it saves).
LARGER = 4
# Bits per change in the filter: about 3% false positives (Spark's default for its own sizing).
BITS_PER_KEY = 8
_CONF = "spark.sql.optimizer.runtime.bloomFilter."
_LONGEST = str(2**63 - 1)
# The settings are the session's, and the MERGEs of tables written at once
# (``concurrent_writes``) overlap: the first to start sets them, each sizes the filter up to its
# own changes, and the last to end puts the session's back. A statement of another thread planned
# meanwhile may get a filter it would not have had, which changes no result. Held per session: a
# warm engine runs other callers' batches at once, each on its own session.
_HELD_LOCK = threading.Lock()


@dataclass
class _Held:
    """The settings the overlapping blocks hold: how many, the largest sizing, what was before."""

    blocks: int = 0
    changes: int = -1
    before: dict[str, str | None] = field(default_factory=dict)


_HELD: dict[int, _Held] = {}


def worth_filtering(changes: int, table_rows: int) -> bool:
    """Whether ``changes`` merged into a table of ``table_rows`` rows (its data files' records)
    are few enough against it for the bloom filter to pay."""
    return changes > 0 and table_rows >= LARGER * changes


def unestimated(frame: DataFrame) -> DataFrame:
    """``frame``'s rows under a plan of their own, which Spark estimates at its default size
    instead of from the plan that computed them. Each read of the result runs ``frame``'s plan
    (the filter's job, then the MERGE): ``frame`` is materialized (a local checkpoint or
    collected rows), so that plan only reads them."""
    return spark_jvm.unestimated(frame)


@contextmanager
def bloom_filtered(spark: SparkSession, changes: int) -> Iterator[None]:
    """Plan the MERGE of the block with Spark's runtime bloom filter allowed whatever the sizes
    of its two sides, sized for ``changes`` keys. The session's settings come back after.

    Spark also skips the filter where it judges by size that the join is probably a broadcast
    (a table under 10 MB), which a MERGE's never is: the table carries a hint against it, and
    the changes are the preserved side. So no size allows one for the statement."""
    session = spark_jvm.session_identity(spark)
    with _HELD_LOCK:
        _held = _HELD.setdefault(session, _Held())
        if _held.blocks == 0:
            _held.before = {key: spark.conf.get(key, None) for key in _settings(0)}
            _held.changes = -1
        _held.blocks += 1
        if changes > _held.changes:
            _held.changes = changes
            for key, value in _settings(changes).items():
                spark.conf.set(key, value)
    try:
        yield
    finally:
        with _HELD_LOCK:
            _held.blocks -= 1
            if _held.blocks == 0:
                del _HELD[session]
                for key, earlier in _held.before.items():
                    if earlier is None:
                        spark.conf.unset(key)
                    else:
                        spark.conf.set(key, earlier)


def _settings(changes: int) -> dict[str, str]:
    """The statement's settings: the filter allowed whatever the sizes, sized for ``changes``."""
    return {
        _CONF + "enabled": "true",
        _CONF + "applicationSideScanSizeThreshold": "0",
        _CONF + "creationSideThreshold": _LONGEST,
        _CONF + "expectedNumItems": str(changes),
        _CONF + "maxNumItems": str(max(changes, 4_000_000)),
        _CONF + "numBits": str(BITS_PER_KEY * changes),
        "spark.sql.autoBroadcastJoinThreshold": "-1",
    }
