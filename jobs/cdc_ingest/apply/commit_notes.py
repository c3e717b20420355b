"""What a table commit remembers about its batch: snapshot properties on Iceberg commits, SQL too.

A resumed batch re-applies its tables, and a table the first attempt already changed then reports
its changes as ``older``. So that ``_cdc_batches`` describes the whole batch, each table's data
(or tombstone) commit carries the pipeline, the batch id and that table's counts (``cdc.counts``),
and the resumed attempt takes them from the table's snapshots. Batch ids count per pipeline and
two pipelines may write one table, so a commit is the batch's only if both match.

``MERGE INTO`` is SQL, which takes no write options: Iceberg's Spark writes add the properties of
``org.apache.iceberg.spark.CommitMetadata`` to every commit of the thread
(``spark_jvm.iceberg_commit_properties``). If a later Iceberg renames it, commits carry no counts
and a resumed batch reports its own attempt's (``tests/test_batch_counts.py`` says so first).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BATCH_PROPERTY = "cdc.batch-id"
PIPELINE_PROPERTY = "cdc.pipeline"
COUNTS_PROPERTY = "cdc.counts"


@dataclass(frozen=True)
class PipelineBatch:
    """One batch of one pipeline: what a table commit is marked with and matched on."""

    pipeline: str
    batch_id: int

    def properties(self) -> dict[str, str]:
        """The snapshot properties naming this batch."""
        return {PIPELINE_PROPERTY: self.pipeline, BATCH_PROPERTY: str(self.batch_id)}

    def snapshot_filter(self) -> str:
        """A SQL condition on a ``snapshots`` row's ``summary``: the snapshot is this batch's.

        A snapshot that names no pipeline was committed before commits named one, and is taken
        as the batch's, as it was then: a batch resumed across an upgrade still finds its own.
        """
        pipeline = self.pipeline.replace("'", "''")
        return (
            f"summary['{BATCH_PROPERTY}'] = '{self.batch_id}' AND "
            f"coalesce(summary['{PIPELINE_PROPERTY}'], '{pipeline}') = '{pipeline}'"
        )


@contextmanager
def commit_properties(spark: SparkSession, properties: dict[str, str]) -> Iterator[None]:
    """Add ``properties`` to the snapshot of every Iceberg commit this thread makes in the block."""
    from cdc_ingest import spark_jvm

    with spark_jvm.iceberg_commit_properties(spark, properties):
        yield


def counts_properties(
    batch: PipelineBatch, table: str, part: str, counts: dict[str, Any]
) -> dict[str, str]:
    """The properties of one table's commit: its batch, and its counts for that part of it."""
    return notes_properties(batch, [(table, part, counts)])


def notes_properties(
    batch: PipelineBatch, notes: list[tuple[str, str, dict[str, Any]]]
) -> dict[str, str]:
    """The properties of a commit for several tables (one ``_cdc_tombstones`` commit of a batch's
    new tables): the batch, and each (table, part, counts)."""
    listed = [{"table": t, "part": p, "counts": c} for t, p, c in notes]
    note: dict[str, Any] = listed[0] if len(listed) == 1 else {"tables": listed}
    return batch.properties() | {COUNTS_PROPERTY: json.dumps(note, sort_keys=True)}


def earlier_counts(
    spark: SparkSession, identifiers: list[str], batch: PipelineBatch, table: str, part: str
) -> dict[str, Any] | None:
    """The counts an earlier attempt of the batch committed for this table and part, if any."""
    for identifier in identifiers:
        rows = spark.sql(
            f"SELECT summary['{COUNTS_PROPERTY}'] AS note FROM {identifier}.snapshots "
            f"WHERE {batch.snapshot_filter()}"
        ).collect()
        for row in rows:
            if row["note"] is None:
                continue
            found = json.loads(row["note"])
            for note in found.get("tables", [found]):
                if note.get("table") == table and note.get("part") == part:
                    counts: dict[str, Any] = note["counts"]
                    return counts
    return None


# What the statements of the batch being applied did to a table, kept on the table itself before
# each statement runs: a resumed batch finds its statements already done (a column that exists,
# a table created or renamed) and reports what they did rather than "nothing to change".
DDL_OUTCOMES_PROPERTY = "cdc.ddl-outcomes"


def _position(batch: PipelineBatch, position: tuple[int, int, int]) -> str:
    return f"{batch.pipeline}/" + ":".join(str(p) for p in (batch.batch_id, *position))


def _unnamed_position(batch: PipelineBatch, position: tuple[int, int, int]) -> str:
    """A note's key before notes named their pipeline."""
    return ":".join(str(p) for p in (batch.batch_id, *position))


def ddl_note(
    properties: dict[str, str], batch: PipelineBatch, position: tuple[int, int, int]
) -> tuple[str, str] | None:
    """(status, detail) an earlier attempt of this batch noted for the statement at ``position``."""
    try:
        notes = json.loads(properties.get(DDL_OUTCOMES_PROPERTY) or "{}")
    except ValueError:
        return None
    if not isinstance(notes, dict):
        return None
    found = notes.get(_position(batch, position), notes.get(_unnamed_position(batch, position)))
    return (str(found[0]), str(found[1])) if isinstance(found, list) and len(found) == 2 else None


def with_ddl_note(
    properties: dict[str, str],
    batch: PipelineBatch,
    position: tuple[int, int, int],
    status: str,
    detail: str,
) -> str:
    """The property's new value: this batch's notes so far (the pipeline's earlier batches'
    dropped, other pipelines' kept) plus this one."""
    try:
        notes = json.loads(properties.get(DDL_OUTCOMES_PROPERTY) or "{}")
    except ValueError:
        notes = {}
    ours, mine = f"{batch.pipeline}/", f"{batch.pipeline}/{batch.batch_id}:"

    def kept_note(key: str) -> bool:
        named = "/" in key
        if named and not key.startswith(ours):
            return True  # another pipeline's
        return key.startswith(mine) or (not named and key.startswith(f"{batch.batch_id}:"))

    kept = {k: v for k, v in notes.items() if kept_note(k)} if isinstance(notes, dict) else {}
    kept[_position(batch, position)] = [status, detail]
    return json.dumps(kept, sort_keys=True)
