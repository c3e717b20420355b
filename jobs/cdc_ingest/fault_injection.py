"""Crashes on purpose, for the crash-safety tests: the process exits abruptly (exit status 99).

- ``CDC_INGEST_FAIL_AT=<step>``: at a named step of the batch (``after_plan``, ``after_tables``,
  ``before_checkpoint``).
- ``CDC_INGEST_FAIL_AFTER_COMMITS=<n>``: right after the run's n-th commit to the catalog, any
  of those ``catalog_commits`` reports (Spark's writes, pyiceberg's commits, tables created or
  rewrites committed together): any commit point of the batch, chosen by the chaos test.

Nothing here is active unless one of the variables is set.
"""

from __future__ import annotations

import itertools
import os
import sys

from cdc_ingest.catalog_commits import on_commit
from cdc_ingest.run_environment import environ

FAIL_AT_ENV = "CDC_INGEST_FAIL_AT"
FAIL_AFTER_COMMITS_ENV = "CDC_INGEST_FAIL_AFTER_COMMITS"
EXIT_STATUS = 99
_installed: list[bool] = []


def maybe_die(step: str) -> None:
    """Exit abruptly if the named step is the one to fail at."""
    if environ().get(FAIL_AT_ENV) == step:
        os._exit(EXIT_STATUS)


def install_commit_fault() -> None:
    """Exit abruptly after the n-th catalog commit of this process, if asked to."""
    limit = environ().get(FAIL_AFTER_COMMITS_ENV)
    if not limit or _installed:
        return
    _installed.append(True)
    counter = itertools.count(1)

    def committed(what: str, altered: str | None) -> None:
        done = next(counter)
        if done >= int(limit):
            print(f"cdc-ingest: killed after commit {done} ({what})", file=sys.stderr, flush=True)
            os._exit(EXIT_STATUS)

    on_commit(committed)
