"""Failures of the catalog or the warehouse met through pyiceberg, as one error the run reports in
one line (exit status 2, as for Spark's), never as a failure of the rows."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class WarehouseWriteError(RuntimeError):
    """pyiceberg could not load, create, write or commit a table: a failure of the catalog or the
    warehouse (the run reports it in one line and exits 2, as for Spark's), never of the rows."""


@contextmanager
def warehouse_failures(what: str) -> Iterator[None]:
    """The block's failures of the catalog or warehouse (pyiceberg's, SQLAlchemy's, I/O) as one
    :class:`WarehouseWriteError` naming ``what``; any other exception passes unchanged."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except Exception as exc:
        failed = isinstance(exc, (OSError, SQLAlchemyError)) or type(exc).__module__.startswith(
            "pyiceberg."
        )
        if not failed:
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise WarehouseWriteError(f"{what}: {type(exc).__name__}: {first}") from exc
