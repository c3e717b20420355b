"""Crashes on purpose, for the crash-safety tests: the process exits abruptly (exit status 99).

- ``CDC_INGEST_FAIL_AT=<step>``: at a named step of the batch (``after_plan``, ``after_tables``,
  ``before_checkpoint``).
- ``CDC_INGEST_FAIL_AFTER_COMMITS=<n>``: right after the run's n-th write to the catalog (a
  ``writeTo(...).append()``, a pyiceberg commit, tables created or rewrites committed together
  in one catalog transaction, or a SQL MERGE, INSERT, UPDATE, DELETE, CREATE, ALTER or DROP,
  but not the ``CREATE ... IF NOT EXISTS`` every run repeats): any commit
  point of the batch, chosen by the chaos test.

Nothing here is active unless one of the variables is set.
"""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any

from cdc_ingest.run_environment import environ

FAIL_AT_ENV = "CDC_INGEST_FAIL_AT"
FAIL_AFTER_COMMITS_ENV = "CDC_INGEST_FAIL_AFTER_COMMITS"
EXIT_STATUS = 99
_WRITES = ("MERGE", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP")
_installed: list[bool] = []


def maybe_die(step: str) -> None:
    """Exit abruptly if the named step is the one to fail at."""
    if environ().get(FAIL_AT_ENV) == step:
        os._exit(EXIT_STATUS)


def install_commit_fault() -> None:
    """Exit abruptly after the n-th catalog write of this process, if asked to."""
    limit = environ().get(FAIL_AFTER_COMMITS_ENV)
    if not limit or _installed:
        return
    from pyspark.sql import DataFrameWriterV2, SparkSession

    _installed.append(True)
    counter = itertools.count(1)

    def committed(what: str) -> None:
        done = next(counter)
        if done >= int(limit):
            print(f"cdc-ingest: killed after commit {done} ({what})", file=sys.stderr, flush=True)
            os._exit(EXIT_STATUS)

    run_sql = SparkSession.sql

    def sql(self: SparkSession, query: str, *args: Any, **kwargs: Any) -> Any:
        result = run_sql(self, query, *args, **kwargs)
        words = query.split(None, 3)
        # Statements that each run repeats unchanged (system tables) are not commit points.
        if words and words[0].upper() in _WRITES and "IF NOT EXISTS" not in query.upper():
            committed(" ".join(words[:3]))
        return result

    append = DataFrameWriterV2.append

    def append_and_count(self: DataFrameWriterV2) -> None:
        append(self)
        committed("append")

    from cdc_ingest.snapshots.commit_points import count_commits

    count_commits(committed)
    SparkSession.sql = sql  # type: ignore[method-assign,assignment]
    DataFrameWriterV2.append = append_and_count  # type: ignore[method-assign]
