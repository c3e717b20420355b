"""Every commit the job makes to the catalog passes through here, and the hooks registered with
:func:`on_commit` run right after each one (the crash tests' fault points: ``fault_injection``).

Spark's writes are :func:`execute` (a statement that changes a table or the catalog: MERGE,
INSERT, UPDATE, DELETE, CREATE, ALTER, DROP) and :func:`append` / :func:`overwrite` (a
``DataFrameWriterV2``); pyiceberg's are reported by ``snapshots`` where it commits, and tables
made through Iceberg's Java API by ``spark_jvm``'s callers. A statement every run repeats
unchanged (``CREATE ... IF NOT EXISTS``) is not a commit point. Nothing happens beyond the write
itself unless a hook is registered. ``tests/test_catalog_commits.py`` checks that no write of a
batch goes around this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, DataFrameWriterV2, SparkSession

# Called with what was committed and, where a table's schema or design changed, the table.
Hook = Callable[[str, "str | None"], None]
WRITES = ("MERGE", "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP")
_ALTERED = re.compile(
    r"^\s*ALTER\s+TABLE\s+((?:`[^`]*`|[^\s.`]+)(?:\.(?:`[^`]*`|[^\s.`]+))*)", re.I
)
_hooks: list[Hook] = []


def on_commit(hook: Hook) -> Callable[[], None]:
    """Call ``hook`` with what was committed after each commit of this process; returns the
    function that removes it."""
    _hooks.append(hook)
    return lambda: _hooks.remove(hook)


def committed(what: str, altered: str | None = None) -> None:
    """Report one commit (``"MERGE INTO t"``, ``"append"``, ``"pyiceberg commit"``), and the
    table whose schema or design it changed, if any."""
    for hook in list(_hooks):
        hook(what, altered)


def is_commit(statement: str) -> bool:
    """Whether a SQL statement is a commit point: a write every run does not repeat."""
    words = statement.split(None, 1)
    return bool(words) and words[0].upper() in WRITES and "IF NOT EXISTS" not in statement.upper()


def execute(spark: SparkSession, statement: str) -> DataFrame:
    """Run a SQL statement that writes to the catalog."""
    result = spark.sql(statement)
    if is_commit(statement):
        altered = _ALTERED.match(statement)
        committed(" ".join(statement.split(None, 3)[:3]), altered[1] if altered else None)
    return result


def append(writer: DataFrameWriterV2) -> None:
    """``writer.append()``: one commit of the frame's rows."""
    writer.append()
    committed("append")


def overwrite(writer: DataFrameWriterV2, condition: Column) -> None:
    """``writer.overwrite(condition)``: one commit replacing the rows ``condition`` selects."""
    writer.overwrite(condition)
    committed("overwrite")
