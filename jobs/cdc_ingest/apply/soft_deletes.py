"""Soft deletes (``deletes: soft``) that do not depend on how files were grouped into batches.

A soft delete keeps its key's row, flagged ``_cdc_deleted``, with the values the row had. When
the batch upserted the key before deleting it, those values are the upsert's, not the table's:
split into two batches between the upsert and the delete, the first would write the upsert and
the second flag its row. So the collapse gives each key's newest change, where it is a delete,
the values of the key's latest earlier upsert of the batch (``latest_upsert``, ``carried``), and
the classification writes them (``DELETED_WRITTEN``) unless the table's row for the key is newer
than that upsert (``carries_values``).

A limit stays: a soft-deleted row keeps the values of the newest upsert applied before its
delete. An upsert older than the delete that lands in a later batch (out of source order) is not
applied, as with any row newer than a late change, though in the source it came before the delete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc_ingest.apply.actions import DELETED_WRITTEN
from cdc_ingest.contract import DELETE, UPSERT
from cdc_ingest.sql_text import literal, name
from cdc_ingest.state.tables import ORDER_COLUMN
from cdc_ingest.table_options import DELETED_COLUMN

if TYPE_CHECKING:
    import pyarrow as pa

    from cdc_ingest.schema.target import TargetTable

# Per change, its key's latest earlier upsert in the batch: a struct of its values and order.
LATEST_UPSERT = "_cdc_latest_upsert"
# Per key's newest change, where it is a delete: the order of the upsert whose values it carries.
CARRIED_ORDER = "_cdc_carried_order"


def latest_upsert(values: list[str], newest_first: str, usable: str | None = None) -> str:
    """SQL: each change's ``LATEST_UPSERT`` (null where the batch upserted its key before it
    in no usable change). ``newest_first``: the collapse's window (its key, newest change first),
    whose sort this shares; ``usable``: the condition a change's values fit their types."""
    fields = [*values, ORDER_COLUMN]
    struct = ", ".join(f"'v{at}', {name(column)}" for at, column in enumerate(fields))
    upsert = f"_cdc_kind = {literal(UPSERT)}" + (f" AND {usable}" if usable else "")
    earlier = f"{newest_first} ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING"
    return (
        f"first(CASE WHEN {upsert} THEN named_struct({struct}) END, true) OVER ({earlier})"
        f" AS {LATEST_UPSERT}"
    )


def carried(columns: list[str], values: list[str]) -> list[str]:
    """SQL selecting ``columns`` of the newest changes, a delete's ``values`` taken from its
    ``LATEST_UPSERT`` where it has one, and its ``CARRIED_ORDER``."""
    carries = f"_cdc_kind = {literal(DELETE)} AND {LATEST_UPSERT} IS NOT NULL"
    at = {column: index for index, column in enumerate(values)}
    selected = [
        f"CASE WHEN {carries} THEN {LATEST_UPSERT}.v{at[column]} ELSE {name(column)} END"
        f" AS {name(column)}"
        if column in at
        else name(column)
        for column in columns
    ]
    order = f"{LATEST_UPSERT}.v{len(values)}"
    return [*selected, f"CASE WHEN {carries} THEN {order} END AS {CARRIED_ORDER}"]


def carries_values() -> str:
    """SQL: whether a newest change that deletes its key writes the values it carries: the table
    holds no row for the key, or its upsert is newer than the row (``_t_order``, null where
    there is none). A tombstone does not stop it: the key's delete came after the upsert in the
    source, and a soft delete keeps the last values before it."""
    return f"({CARRIED_ORDER} IS NOT NULL AND (_t_order IS NULL OR {CARRIED_ORDER} > _t_order))"


def soft_carried(target: TargetTable) -> list[str] | None:
    """The columns a table's newest deletes carry from their upserts: with soft deletes, every
    written column but the key's (``newest_changes``' ``carry``); else none."""
    if target.deletes != "soft":
        return None
    return [c for c in target.written_columns if c not in target.keys]


def with_flag(rows: pa.Table, deleted: bool) -> pa.Table:
    """``rows`` with the soft-delete flag ``_cdc_deleted`` set to ``deleted`` on each."""
    import pyarrow as pa

    return rows.append_column(DELETED_COLUMN, pa.repeat(pa.scalar(deleted), rows.num_rows))


def with_flags(rows: pa.Table) -> pa.Table:
    """``rows`` (with ``_action``) with the soft-delete flag ``_cdc_deleted``: set on each that
    a delete writes (``DELETED_WRITTEN``)."""
    import pyarrow.compute as pc

    flags = pc.equal(rows.column("_action"), DELETED_WRITTEN)
    return rows.append_column(DELETED_COLUMN, flags)
