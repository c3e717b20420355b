"""The collapse stage: each key's changes in a batch down to its newest, which the
classification then compares with what the table holds (``classify``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc_ingest import sql_text
from cdc_ingest.apply.soft_deletes import carried, latest_upsert
from cdc_ingest.apply.update_images import KEEP_COLUMN, fill_unsent
from cdc_ingest.state.tables import ORDER_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# The order of a key's oldest usable change in the batch (``first_order``).
FIRST_ORDER = "_cdc_first_order"


def newest_changes(
    good: DataFrame,
    unsent: list[str] | None = None,
    per: tuple[str, ...] = ("_cdc_key",),
    typing_errors: bool = False,
    carry: list[str] | None = None,
    first_order: bool = False,
) -> DataFrame:
    """Each key's newest change, with ``_changes``: how many changes of the batch it stands for.

    One sort by key and order serves both window functions (same partitioning and ordering), and
    only the newest change per key goes on: the others are merely counted as superseded.
    ``unsent``: columns some changes did not send (``KEEP_COLUMN``, ``fill_unsent``).
    ``per``: what a key is (with ``_cdc_target`` first when the frame holds several tables).
    ``typing_errors``: ``good`` still holds the changes whose values did not fit their types
    (``_type_error``, never with ``unsent``), which supersede nothing and are not counted: they
    rank after every usable change of their key, and go with the ranks. Filtered out before the
    collapse instead, the filter is pushed below the projection that types the changes, and every
    change is typed twice: once for the filter's test, once for the projection.
    ``carry``: with soft deletes, the columns a newest delete takes from its key's latest earlier
    upsert (``soft_deletes``). ``first_order``: each key also with the order of its oldest
    change (``FIRST_ORDER``), which says whether all of them are newer than the table's row.
    """
    if unsent:
        if typing_errors:
            raise ValueError("changes with typing errors cannot fill unsent columns")
        good = fill_unsent(good, unsent, per)
    usable = "_type_error IS NULL"
    partition = ", ".join(sql_text.name(column) for column in per)
    ordered = f"{usable} DESC, {ORDER_COLUMN} DESC" if typing_errors else f"{ORDER_COLUMN} DESC"
    newest_first = f"PARTITION BY {partition} ORDER BY {ordered}"
    whole_key = f"{newest_first} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
    counted = f"count(CASE WHEN {usable} THEN 1 END)" if typing_errors else "count(1)"
    dropped = {"_cdc_file_idx", "_cdc_line", "_cdc_source", "_type_error"}
    kept_names = [column for column in good.columns if column not in dropped]
    kept = [sql_text.name(column) for column in kept_names]
    carried_values = [*(carry or []), *([KEEP_COLUMN] if KEEP_COLUMN in good.columns else [])]
    fits = usable if typing_errors else None
    carrying = [] if carry is None else [latest_upsert(carried_values, newest_first, fits)]
    oldest = f"CASE WHEN {usable} THEN {ORDER_COLUMN} END" if typing_errors else ORDER_COLUMN
    firsts = [f"min({oldest}) OVER ({whole_key}) AS {FIRST_ORDER}"] if first_order else []
    counts = ["_changes", *(FIRST_ORDER for _ in firsts)]
    ranked = sql_text.select(
        good,
        [
            *kept,
            *(["_type_error"] if typing_errors else []),
            f"row_number() OVER ({newest_first}) AS _rank",
            f"{counted} OVER ({whole_key}) AS _changes",
            *firsts,
            *carrying,
        ],
    )
    newest = ranked.where(f"_rank = 1 AND {usable}" if typing_errors else "_rank = 1")
    if carry is not None:
        return sql_text.select(newest, [*carried(kept_names, carried_values), *counts])
    return sql_text.select(newest, [*kept, *counts])
