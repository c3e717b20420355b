"""What a batch asked Spark to do, counted in-process for tests that check work is shared."""

from __future__ import annotations

import pytest


def count_local_checkpoints(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, one entry per local checkpoint taken (a table applied on its own takes one
    of its own; a group of tables one for all)."""
    from pyspark.sql import DataFrame

    taken: list[int] = []
    local_checkpoint = DataFrame.localCheckpoint

    def counted(self: DataFrame, eager: bool = True) -> DataFrame:
        taken.append(1)
        return local_checkpoint(self, eager)

    monkeypatch.setattr(DataFrame, "localCheckpoint", counted)
    return taken
