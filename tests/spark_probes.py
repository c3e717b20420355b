"""What a batch asked Spark to do, counted in-process for tests that check work is shared."""

from __future__ import annotations

from typing import Any

import pytest


def count_local_checkpoints(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, one entry per local checkpoint taken (a table applied on its own takes one
    of its own; a group of tables one for all)."""
    try:  # Spark 4: the classic (non-Connect) DataFrame implements what pyspark.sql declares.
        from pyspark.sql.classic.dataframe import DataFrame
    except ImportError:
        from pyspark.sql import DataFrame

    taken: list[int] = []
    local_checkpoint = DataFrame.localCheckpoint

    def counted(self: DataFrame, eager: bool = True) -> DataFrame:
        taken.append(1)
        return local_checkpoint(self, eager)

    monkeypatch.setattr(DataFrame, "localCheckpoint", counted)
    return taken


# The paths a group's tables are written by: small tables are rewritten through pyiceberg; with
# rewritten_rows=0 every one is merged by Spark. A group of few changes is collected by the job
# that classifies it; with chunk_rows=2 it is kept in a local checkpoint and its tables' rows
# collected in chunks (``WritePolicy``).
GROUP_WRITE_PATHS = [(None, None), (0, None), (None, 2)]


def use_group_write_path(lake: Any, rewritten_rows: int | None, chunk_rows: int | None) -> int:
    """Take one of ``GROUP_WRITE_PATHS`` for the lake's runs; returns how many local checkpoints
    a batch of one group then makes (the batch's, and the group's if it is not collected)."""
    if rewritten_rows is not None:
        lake.route_at(rewritten_rows=rewritten_rows)
    if chunk_rows is not None:
        lake.route_at(chunk_rows=chunk_rows)
    return 2 if chunk_rows else 1
