"""A few changes into a large table: only the table's rows of the batch's keys go on.

Both reads of a mirror a batch makes, the classification's join and the ``MERGE INTO``, are
outer joins with the batch's changes on the preserved side, so Spark shuffles and sorts every
row of the table to join it with a few thousand changes. Both cost less than half as much when
the table's rows are first kept to the batch's keys: by a broadcast semi-join while the
classification reads it, and by the keys listed in the MERGE's ``ON`` condition
(``t.id IN (...)``), which Spark applies to the table's rows before the shuffle (and Iceberg to its
files' statistics). Either is implied by the join's own key equality, so the result is the same; it
pays only where the table is much larger than the batch (the semi-join computes the batch's collapse
a second time, the list costs a small job).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from cdc_ingest import sql_text
from cdc_ingest.state.tables import quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from cdc_ingest.schema.target import TargetTable

# At most this many changes to a table count as a few (the semi-join's broadcast holds their keys).
FEW_CHANGES = 50_000
# At most this many keys are listed in a MERGE's condition.
LISTED_KEYS = 10_000
# ... and only into a table holding at least this many times as many rows.
LARGER = 20
# Key types listed as literals; a table keyed otherwise is merged without the list.
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")


# One table's changes (not collapsed: ``classify.with_table_rows``) are semi-joined at up to this
# many (a broadcast of 2M bigint keys is about 50 MB) into a table of at least this many times as
# many rows: below that ratio the broadcast costs more than the rows it keeps out of the join's
# shuffle and sort save.
BROADCAST_KEYS = 2_000_000
SEMI_JOINED_LARGER = 8


def semi_joined(changes: int, table_rows: int) -> bool:
    """Whether one table's ``changes``, joined with its rows before their collapse, keep the
    table's rows of ``table_rows`` to their keys (``rows_of_keys``)."""
    return 0 < changes <= BROADCAST_KEYS and table_rows >= SEMI_JOINED_LARGER * changes


def few_changes(changes: int, table_rows: int) -> bool:
    """Whether ``changes`` to a table of ``table_rows`` rows (its data files' records) are few
    enough for the classification to read only their keys' rows."""
    return 0 < changes <= FEW_CHANGES and table_rows >= LARGER * changes


def rows_of_keys(
    current: DataFrame, changes: DataFrame, keys: tuple[str, ...], table: str | None = None
) -> DataFrame:
    """The rows of ``current`` (key columns named ``_t_<key>``) whose key one of ``changes``
    (key columns by their names) has: a broadcast semi-join, no shuffle of ``current``.
    ``table``: the column of ``changes`` naming each change's table (``_t_target`` in
    ``current``), when they hold several tables."""
    pairs = [(k, f"_t_{k}") for k in keys] + ([(table, "_t_target")] if table else [])
    wanted = sql_text.select(
        changes,
        [f"{sql_text.name(c)} AS {sql_text.name(f'_w{i}')}" for i, (c, _) in enumerate(pairs)],
    )
    on = " AND ".join(
        f"{sql_text.name(t)} = {sql_text.name(f'_w{i}')}" for i, (_, t) in enumerate(pairs)
    )
    return current.join(F.broadcast(wanted), F.expr(on), "left_semi")


def listed_keys(merged: DataFrame, target: TargetTable, count: int, table_rows: int) -> str:
    """``AND t.<key> IN (...)`` for a MERGE of ``merged`` (``count`` rows, every key of which is
    listed) into a table of ``table_rows`` rows, or "" where the list would not pay or a key's
    type has no literal here."""
    if not 0 < count <= LISTED_KEYS or table_rows < LARGER * count:
        return ""
    types = [target.columns[k].spark_type if k in target.columns else "" for k in target.keys]
    if not all(t in _INTEGRAL or t == "string" for t in types):
        return ""
    rows = merged.select(*sql_text.columns(target.keys)).distinct().collect()
    if not rows or len(rows) > LISTED_KEYS:
        return ""
    if len(target.keys) == 1:
        values = ", ".join(sql_text.literal(r[0]) for r in rows)
        return f" AND t.{quote(target.keys[0])} IN ({values})"
    columns = ", ".join(f"t.{quote(k)}" for k in target.keys)
    # Compared as structs, whose field types must be the columns' own.
    cast = [
        ", ".join(f"CAST({sql_text.literal(v)} AS {t})" for v, t in zip(r, types, strict=True))
        for r in rows
    ]
    tuples = ", ".join(f"({values})" for values in cast)
    return f" AND ({columns}) IN ({tuples})"
