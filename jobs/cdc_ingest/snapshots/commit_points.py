"""The commit points of the snapshots made through pyiceberg, for the crash-safety tests
(``cdc_ingest.fault_injection``): a callback after each one.

Every pyiceberg commit of one table goes through ``Table._do_commit`` (a transaction's,
``Table.append``'s, a rewrite's), whatever made it; one refused by the catalog raises and is not
counted. Commits of many tables in one catalog transaction (``staged_commits``) and new tables
registered together (``first_snapshot``) make no table's commit, so they are counted where this
package makes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def count_commits(committed: Callable[[str], None]) -> None:
    """Call ``committed`` with what was committed, right after each commit of this process."""
    from pyiceberg.table import Table

    from cdc_ingest.snapshots import arrow_catalog, staged_commits

    table_commit = Table._do_commit

    def table_commit_and_count(self: Table, *args: Any, **kwargs: Any) -> None:
        table_commit(self, *args, **kwargs)
        committed("pyiceberg commit")

    commit_staged = staged_commits.commit_staged
    register_tables = arrow_catalog.register_tables  # type: ignore[attr-defined]

    def commit_staged_and_count(catalog: Any, staged: list[Any]) -> Any:
        left = commit_staged(catalog, staged)
        if staged:
            committed("pyiceberg commit of rewrites")
        return left

    def register_tables_and_count(catalog: Any, staged: list[Any]) -> None:
        register_tables(catalog, staged)
        committed("pyiceberg create")

    staged_commits.commit_staged = commit_staged_and_count
    arrow_catalog.register_tables = register_tables_and_count  # type: ignore[attr-defined]
    Table._do_commit = table_commit_and_count  # type: ignore[method-assign]
