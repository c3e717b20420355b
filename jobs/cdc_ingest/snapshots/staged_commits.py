"""The rewrites of many small tables committed to a SQL catalog in one transaction.

A batch into hundreds of small existing tables rewrites each of them (``copy_on_write``), and
pyiceberg's commit of each loads the table again (a query and its metadata file read and parsed),
checks the commit against it, then updates the table's row in a session of its own: a large
part of a small table's rewrite.
Staged here instead, each rewrite's metadata file is written against the table as the batch
read it, and the catalog swaps every table's metadata location in one transaction, each only if
its row still names the metadata the rewrite started from (the check Iceberg's JDBC catalog and
pyiceberg's make). If another writer moved one of the tables meanwhile, the transaction commits
none, and each table is then committed alone, so that only the moved ones are left out (their
changes are merged by Spark instead, comparing orders again) and the files written for them are
left unreferenced, as after any failed commit.

Private API: the staging and writing of a table's next metadata (``_update_and_stage_table``,
``_write_metadata``, what pyiceberg's own commit calls) and the SQL catalog's table row
(``IcebergTables``); pyiceberg is pinned 0.12.*, and tests/test_staged_commits.py (SQLite and
PostgreSQL) and tests/test_concurrent_writer.py would catch a change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from cdc_ingest.catalog_commits import committed

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import Table
    from pyiceberg.table.update import TableRequirement, TableUpdate
    from sqlalchemy import CursorResult
    from sqlalchemy.orm import Session

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StagedCommit:
    """A table's next metadata, written, not yet the catalog's: ``identifier`` (namespace, name),
    the metadata location it was read at and the one that replaces it."""

    identifier: tuple[str, str]
    read_at: str
    replaced_by: str


def can_stage(catalog: Catalog | None) -> TypeGuard[SqlCatalog]:
    """Whether ``catalog`` is a SQL catalog whose database reports how many rows an update
    matched (SQLite and PostgreSQL do): its commits can be staged and swapped together."""
    engine = getattr(catalog, "engine", None)
    return engine is not None and bool(getattr(engine.dialect, "supports_sane_rowcount", False))


def stage_commit(
    catalog: SqlCatalog,
    table: Table,
    updates: tuple[TableUpdate, ...],
    requirements: tuple[TableRequirement, ...],
) -> StagedCommit:
    """Write the metadata that ``updates`` make of ``table`` (as loaded), without committing it:
    ``requirements`` are checked against ``table``, and the catalog's check of the metadata
    location (``commit_staged``) stands for the reload pyiceberg's commit makes."""
    staged = catalog._update_and_stage_table(table, table.name(), requirements, updates)
    catalog._write_metadata(staged.metadata, staged.io, staged.metadata_location)
    namespace, name = table.name()[-2:]
    return StagedCommit((namespace, name), table.metadata_location, staged.metadata_location)


def commit_staged(catalog: SqlCatalog, staged: list[StagedCommit]) -> list[StagedCommit]:
    """Make the ``staged`` metadata the catalog's, all in one transaction, or else each alone;
    returns those not committed, whose table another writer moved since it was read."""
    if not staged:
        return []
    moved = _commit_all(catalog, staged)
    committed("pyiceberg commit of rewrites")
    return moved


def _commit_all(catalog: SqlCatalog, staged: list[StagedCommit]) -> list[StagedCommit]:
    from sqlalchemy.orm import Session

    with Session(catalog.engine) as session:
        if all(_swap(catalog, session, commit) for commit in staged):
            session.commit()
            return []
        session.rollback()
    moved = []
    for commit in staged:
        with Session(catalog.engine) as session:
            if _swap(catalog, session, commit):
                session.commit()
            else:
                session.rollback()
                moved.append(commit)
    return moved


def _swap(catalog: SqlCatalog, session: Session, commit: StagedCommit) -> bool:
    """Point the table's row at its new metadata if it still names the metadata it was read at."""
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import update

    namespace, name = commit.identifier
    statement = (
        update(IcebergTables)
        .where(
            IcebergTables.catalog_name == catalog.name,
            IcebergTables.table_namespace == namespace,
            IcebergTables.table_name == name,
            IcebergTables.metadata_location == commit.read_at,
        )
        .values(metadata_location=commit.replaced_by, previous_metadata_location=commit.read_at)
    )
    # An UPDATE's result is a cursor's, which says how many rows it matched.
    result = cast("CursorResult[Any]", session.execute(statement))
    return result.rowcount == 1


@dataclass
class StagedRewrites:
    """The rewrites of a block (``ArrowCatalog.rewritten_together``), staged to be committed
    together; ``moved`` holds, once committed, the identifiers of those left out."""

    staged: list[tuple[str, StagedCommit]] = field(default_factory=list)
    moved: set[str] = field(default_factory=set)

    def stage(
        self,
        catalog: SqlCatalog,
        identifier: str,
        table: Table,
        updates: tuple[TableUpdate, ...],
        requirements: tuple[TableRequirement, ...],
    ) -> None:
        """Stage the commit of ``updates`` to ``table`` (``stage_commit``) as ``identifier``'s."""
        self.staged.append((identifier, stage_commit(catalog, table, updates, requirements)))

    def commit(self, catalog: SqlCatalog) -> None:
        """Commit every staged rewrite (``commit_staged``); note those left out in ``moved``."""
        left = commit_staged(catalog, [commit for _, commit in self.staged])
        self.moved.update(identifier for identifier, commit in self.staged if commit in left)
        for commit in left:
            log.info("%s.%s changed meanwhile: merged by Spark", *commit.identifier)
