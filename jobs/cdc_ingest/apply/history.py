"""A mirrored table's SCD type 2 history (``history: scd2``): one row per version of each key.

After a table's changes are merged into the mirror, the same changes (typed, not collapsed, dead
letters left out) are placed among the versions the history table holds for their keys, in the
source's order (``_cdc_order``), not the landing order:

- a change to a tracked column opens a version; a change to others updates the version it falls
  in (which then holds the values of its newest change by order);
- a delete is kept as a version of no length (``_cdc_valid_from`` = ``_cdc_valid_to``) that
  closes the key's version before it: a later insert opens a new one, and a late event older
  than the delete is placed before it;
- ``_cdc_valid_to`` is the next version's ``_cdc_valid_from``, null for the current version;
  ``_cdc_current`` marks it; ``_cdc_op`` says how a version began (insert, update, delete).

A key whose changes in the batch are all newer than what the mirror (or its tombstone) held
before the batch, as the mirror's own classification found (``keyed.apply_table``), is placed
from its changes alone: its versions follow the one the history holds as current, which the
first of them either extends (an upsert of the same tracked values) or closes. Only keys with a
late change, and every key of a replay or rebuild (whose mirror may hold less than its history),
read the versions the history holds for them, and are placed among those. For in-order keys the
mirror's row decides how the first version began: an update where the mirror held the key live,
else an insert; a key neither the mirror nor its tombstones know is new.

The versions of the batch's keys are written by one MERGE: placed versions on (key,
``_cdc_order``), where new versions are inserted, versions whose end or values moved are
updated, versions a late event made part of another are deleted; an in-order key's versions are
inserted and its current version extended or closed. A change whose (key, ``_cdc_order``) the
table holds already is not placed again (a replayed file), and a resumed batch skips the history
commits its first attempt made (``commit_notes``), so a rerun never doubles a version.

Known limit: a version made of several changes (untracked columns) keeps only its newest values
(and ``_cdc_last_order``, their order): a late change to a tracked column that falls inside it
opens a version lasting until the next stored one.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from cdc_ingest import sql_text
from cdc_ingest.apply.classify import IN_ORDER
from cdc_ingest.apply.commit_notes import (
    PipelineBatch,
    commit_properties,
    counts_properties,
    earlier_counts,
)
from cdc_ingest.apply.few_keys import listed_keys
from cdc_ingest.apply.runtime_filter import bloom_filtered, unestimated, worth_filtering
from cdc_ingest.apply.typed_changes import typed_changes
from cdc_ingest.apply.update_images import KEEP_COLUMN, with_old_key_deletes
from cdc_ingest.catalog_commits import append, execute
from cdc_ingest.contract import DELETE, UPSERT
from cdc_ingest.stages import stage
from cdc_ingest.state.tables import (
    ORDER_COLUMN,
    TABLE_PROPERTIES,
    current_snapshot_facts,
    qualified,
    quote,
    sql_string,
    table_columns,
    table_property,
)
from cdc_ingest.table_options import TableDesignError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.window import WindowSpec

    from cdc_ingest.apply.keyed import MirrorKeys
    from cdc_ingest.schema.target import TargetTable

VALID_FROM = "_cdc_valid_from"
VALID_TO = "_cdc_valid_to"
CURRENT = "_cdc_current"
OP = "_cdc_op"
BATCH = "_cdc_batch_id"
# The order of a version's newest change (a version of several changes: untracked columns).
LAST_ORDER = "_cdc_last_order"
# The columns a history table adds to the mirror's, in this order after them.
HISTORY_COLUMNS: dict[str, str] = {
    VALID_FROM: "timestamp",
    VALID_TO: "timestamp",
    CURRENT: "boolean",
    OP: "string",
    BATCH: "bigint",
    ORDER_COLUMN: "binary",
    LAST_ORDER: "binary",
}
INSERT, UPDATE = "insert", "update"
# The history table's property naming the mirror it keeps the history of.
HISTORY_OF_PROPERTY = "cdc.history-of"
_KIND, _STORED, _DROP, _KEEP = "_h_kind", "_h_stored", "_h_drop", "_h_keep"
# Whether the mirror held a key live before the batch; whether all its changes are newer.
_LIVE, _IN_ORDER = "_h_live", "_h_in_order"
# What a source row of the history's MERGE does: a version placed among the stored ones, an
# in-order key's first version (extends the current one where it matches it) and its later
# ones, and the close of the current version the first does not extend.
_ROLE = "_h_role"
PLACED, FIRST, LATER, CLOSE = "placed", "first", "later", "close"
# Whether a placed version is its key's first among the rows placed (no version before it).
_FIRST = "_h_first"
# How many of a placed version's changes are new to the table (0 in a stored row dropped).
_NEW = "_h_new"
_views = itertools.count()
HISTORY_CHANGES = "history_changes"


def history_identifier(catalog: str, namespace: str, target: TargetTable) -> str:
    assert target.history is not None
    return qualified(catalog, namespace, target.history.table)


def check_history_table(
    spark: SparkSession, catalog: str, namespace: str, target: TargetTable, existing: set[str]
) -> None:
    """Refuse the table (``TableDesignError``) when its history table's name is taken by a table
    that is not its history (a mirror made before the history was asked for)."""
    assert target.history is not None
    if target.history.table not in existing:
        return
    identifier = history_identifier(catalog, namespace, target)
    owner = table_property(spark, identifier, HISTORY_OF_PROPERTY)
    if owner is None or owner.lower() != target.name.lower():
        whose = "a mirrored table" if owner is None else f"the history of table {owner}"
        raise TableDesignError(
            f"its history table {target.history.table} (history_table) is {whose}: name the "
            "history otherwise, or drop that table"
        )


def apply_history(
    spark: SparkSession,
    catalog: str,
    namespace: str,
    target: TargetTable,
    changes: DataFrame,
    batch: PipelineBatch,
    part: str,
    resumed: bool,
    landed_ms: tuple[int | None, ...] = (),
    existing: set[str] | None = None,
    mirror: MirrorKeys | None = None,
) -> int:
    """Place this table's changes (``changes``: the batch's, every table's) in its history table;
    returns how many of them were new to it. ``landed_ms``: each file's landing time (epoch
    millis, by ``_cdc_file_idx``), a version's start where the format sends no source time;
    ``existing``: the namespace's tables as the run knows them (a history table made is added);
    ``mirror``: the mirror's classification of the batch's keys against what it held before the
    batch, whose in-order keys are placed without reading the history's versions (None: every
    key reads them)."""
    identifier = history_identifier(catalog, namespace, target)
    if resumed:
        earlier = earlier_counts(spark, [identifier], batch, target.name, part)
        if earlier is not None:  # the first attempt committed this part: its count stands
            return int(earlier.get(HISTORY_CHANGES, 0))
    with stage("prepare history table"):
        assert target.history is not None
        known = existing is not None and target.history.table in existing
        stored_columns = _prepare_table(spark, identifier, target, create=not known)
        if existing is not None:
            existing.add(target.history.table)
    events = _events(changes, target, landed_ms, stored_columns)
    keys = list(target.keys)
    _, held_rows = current_snapshot_facts(spark, identifier)
    fresh = held_rows == 0
    tracked = target.history.tracked(stored_columns) if target.history else stored_columns
    changing = [c for c in tracked if c not in keys]
    if fresh:
        versions = _placed(_as_new(events), target, stored_columns, changing)
    else:
        late: DataFrame | None = events
        ahead = None
        if mirror is not None:
            late, ahead = _in_order(events, mirror, target)
        parts = []
        if late is not None:
            stored = _stored_rows(spark, identifier, late, keys, stored_columns)
            rows = stored.unionByName(_as_new(late))
            # A change the table holds already (a replayed file) is not placed again: it follows
            # the stored row of its order. By key, as the versions' windows are: one shuffle.
            again = Window.partitionBy(*keys).orderBy(ORDER_COLUMN, F.col(_STORED).desc())
            seen = F.lag(ORDER_COLUMN).over(again) == F.col(ORDER_COLUMN)
            rows = rows.withColumn("_h_seen", seen).where("_h_seen IS NOT TRUE").drop("_h_seen")
            placed = _placed(rows, target, stored_columns, changing)
            parts.append(placed.withColumn(_ROLE, F.lit(PLACED)))
        if ahead is not None:
            parts.append(_following(_as_new(ahead), target, stored_columns, changing))
        if not parts:
            return 0
        versions = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    # Placed once (every window above shares one shuffle by key): counted here, then written.
    versions = versions.localCheckpoint(eager=False)
    with stage("count history changes"):
        counted = versions.agg(F.sum(_NEW)).first()
        new = int(counted[0] or 0) if counted is not None else 0
    if not new:
        return 0
    note = counts_properties(batch, target.name, part, {HISTORY_CHANGES: new})
    written = [*stored_columns, *HISTORY_COLUMNS]
    with commit_properties(spark, note):
        if fresh:
            with stage("append to history"):
                placed = versions.where(~F.col(_DROP)).select(*sql_text.columns(written))
                append(placed.writeTo(identifier))
        else:
            with stage("merge into history"):
                _merge(spark, versions, identifier, target, written, changing, new, held_rows)
    return new


def _stored_rows(
    spark: SparkSession,
    identifier: str,
    events: DataFrame,
    keys: list[str],
    stored_columns: list[str],
) -> DataFrame:
    """The versions the history holds for the keys of ``events``, as rows to place among them."""
    held = spark.table(identifier).join(
        F.broadcast(events.select(*sql_text.columns(keys)).distinct()), on=keys, how="left_semi"
    )
    return held.select(
        *[F.col(sql_text.name(c)) for c in stored_columns],
        ORDER_COLUMN,
        F.when(F.col(OP) == DELETE, F.lit(DELETE)).otherwise(F.lit(UPSERT)).alias(_KIND),
        VALID_FROM,
        BATCH,
        F.lit(True).alias(_STORED),
        F.coalesce(LAST_ORDER, ORDER_COLUMN).alias(LAST_ORDER),
        F.array().cast("array<string>").alias(_KEEP),
    )


def _placed(
    rows: DataFrame, target: TargetTable, columns: list[str], changing: list[str]
) -> DataFrame:
    """``rows`` (stored versions and new changes of the same keys) placed as versions."""
    keys = list(target.keys)
    if target.unavailable_values:
        rows = _filled(rows, keys, columns)
    return _versions(rows, keys, columns, changing)


def _in_order(
    events: DataFrame, mirror: MirrorKeys, target: TargetTable
) -> tuple[DataFrame | None, DataFrame | None]:
    """``events`` split into those of keys with a change not newer than what the mirror held
    before the batch (placed among the stored versions) and those of keys whose every change is
    newer (``_h_live``: whether the mirror held the key live); either is None when the
    classification counted no such key. The classification saw every key the history does (the
    same typed changes): one it did not would be taken as new."""
    keys = list(target.keys)
    soft = "_t_deleted" in mirror.classified.columns
    live = "_t_order IS NOT NULL" + (" AND NOT coalesce(_t_deleted, false)" if soft else "")
    held = sql_text.select(
        mirror.classified,
        [*(sql_text.name(k) for k in keys), f"{live} AS {_LIVE}", f"{IN_ORDER} AS {_IN_ORDER}"],
    )
    joined = events.join(held, on=keys, how="left")
    joined = sql_text.select(
        joined,
        [
            *(sql_text.name(c) for c in events.columns),
            f"coalesce({_LIVE}, false) AS {_LIVE}",
            f"coalesce({_IN_ORDER}, true) AS {_IN_ORDER}",
        ],
    )
    late = joined.where(f"NOT {_IN_ORDER}").drop(_IN_ORDER, _LIVE) if mirror.late else None
    ahead = joined.where(_IN_ORDER).drop(_IN_ORDER) if mirror.in_order else None
    return late, ahead


def _following(
    rows: DataFrame, target: TargetTable, columns: list[str], changing: list[str]
) -> DataFrame:
    """In-order keys' new rows (``_h_live``) placed as versions after the history's current
    one: the first marked to extend it (``first``) or close it (a copy, ``close``), the others
    ``later``."""
    versions = _versions(rows, list(target.keys), columns, changing, live=_LIVE)
    marked = versions.withColumn(_ROLE, F.when(F.col(_FIRST), F.lit(FIRST)).otherwise(LATER))
    closes = versions.where(F.col(_FIRST)).select(
        *[F.col(c) for c in versions.columns if c != _NEW],
        F.lit(0).cast("bigint").alias(_NEW),
        F.lit(CLOSE).alias(_ROLE),
    )
    return marked.unionByName(closes)


def _as_new(events: DataFrame) -> DataFrame:
    return events.withColumn(_STORED, F.lit(False)).withColumn(LAST_ORDER, F.col(ORDER_COLUMN))


def _prepare_table(
    spark: SparkSession, identifier: str, target: TargetTable, create: bool = True
) -> list[str]:
    """Create the history table (``create``: it may not exist yet), or add the columns the
    mirror gained; returns its columns besides ``HISTORY_COLUMNS`` (a column the source dropped
    stays, with its old values)."""
    wanted = {n: c.spark_type for n, c in target.columns.items()}
    wanted |= {n: c.spark_type for n, (_, c) in target.computed.items()}
    definitions = [
        f"{quote(n)} {t}{' NOT NULL' if n in target.keys else ''}" for n, t in wanted.items()
    ]
    definitions += [f"{quote(n)} {t}" for n, t in HISTORY_COLUMNS.items()]
    properties = {**TABLE_PROPERTIES, HISTORY_OF_PROPERTY: target.name}
    listed = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in properties.items())
    if create:
        execute(
            spark,
            f"CREATE TABLE IF NOT EXISTS {identifier} ({', '.join(definitions)}) USING iceberg "
            f"TBLPROPERTIES ({listed})",
        )
    held = table_columns(spark, identifier)
    lowered = {n.lower() for n in held}
    added = {n: t for n, t in wanted.items() if n.lower() not in lowered}
    if added:
        columns = ", ".join(f"{quote(n)} {t}" for n, t in added.items())
        execute(spark, f"ALTER TABLE {identifier} ADD COLUMNS ({columns})")
    for name, spark_type in wanted.items():
        if name in held and held[name] != spark_type:
            execute(spark, f"ALTER TABLE {identifier} ALTER COLUMN {quote(name)} TYPE {spark_type}")
    mine = [n for n in held if n not in HISTORY_COLUMNS]
    return [*mine, *(n for n in added if n not in mine)]


def _events(
    changes: DataFrame, target: TargetTable, landed_ms: tuple[int | None, ...], columns: list[str]
) -> DataFrame:
    """The table's changes that apply, as history rows: its columns (null where the table has a
    column the change's schema no longer has), order, kind, start and batch."""
    if target.moves_keys:
        changes = with_old_key_deletes(changes, target)
    typed = typed_changes(changes, target, event_time=True).where(F.col("_type_error").isNull())
    if target.deletes == "ignore":
        typed = typed.where(F.col("_cdc_kind") != DELETE)
    keep = KEEP_COLUMN if KEEP_COLUMN in typed.columns else "CAST(array() AS ARRAY<STRING>)"
    landed = ", ".join(sql_text.literal(ms) for ms in landed_ms) or "CAST(NULL AS BIGINT)"
    start = f"coalesce(_cdc_event_ms, element_at(array({landed}), _cdc_file_idx + 1))"
    have = set(typed.columns)
    return sql_text.select(
        typed,
        [
            *(sql_text.name(c) if c in have else f"NULL AS {sql_text.name(c)}" for c in columns),
            ORDER_COLUMN,
            f"_cdc_kind AS {_KIND}",
            f"coalesce(timestamp_millis({start}), current_timestamp()) AS {VALID_FROM}",
            BATCH,
            f"{keep} AS {_KEEP}",
        ],
    )


def _filled(rows: DataFrame, keys: list[str], columns: list[str]) -> DataFrame:
    """A value the source did not send (``unavailable_values``: a placeholder, listed in the
    change's ``_h_keep``) is the key's last value before it that was sent, as in the mirror."""
    before = (
        Window.partitionBy(*keys).orderBy(ORDER_COLUMN).rowsBetween(Window.unboundedPreceding, -1)
    )

    def filled(c: str) -> Column:
        column, kept = F.col(sql_text.name(c)), F.array_contains(_KEEP, c)
        sent = F.last(F.when(~kept, F.struct(column.alias("v"))), ignorenulls=True).over(before)
        return F.when(kept, sent["v"]).otherwise(column).alias(c)

    return rows.select(
        *[
            filled(c) if c in columns and c not in keys else F.col(sql_text.name(c))
            for c in rows.columns
        ]
    )


def _same(columns: list[str], window: WindowSpec) -> Column:
    """Whether a row's ``columns`` equal those of the row before it (nulls equal)."""
    same = F.lit(True)
    for c in columns:
        column = F.col(sql_text.name(c))
        same = same & column.eqNullSafe(F.lag(column).over(window))
    return same


def _versions(
    rows: DataFrame,
    keys: list[str],
    columns: list[str],
    tracked: list[str],
    live: str | None = None,
) -> DataFrame:
    """Every row of the batch's keys placed: the versions (``_h_drop`` false), and the stored
    rows that are part of an earlier version now (``_h_drop`` true). ``live``: a column saying
    whether the key has a live version before ``rows`` (in-order keys), which makes its first
    version an update; else only a version among ``rows`` does."""
    by_order = Window.partitionBy(*keys).orderBy(ORDER_COLUMN)
    prior_kind = F.lag(_KIND).over(by_order)
    joins = (F.col(_KIND) == UPSERT) & (prior_kind == UPSERT) & _same(tracked, by_order)
    grouped = rows.withColumn("_h_opens", F.when(joins, 0).otherwise(1))
    grouped = grouped.withColumn(
        "_h_version", F.sum("_h_opens").over(by_order.rowsBetween(Window.unboundedPreceding, 0))
    )
    grouped = _with_newest_values(grouped, keys, columns, tracked, [live] if live else [])
    heads = grouped.where("_h_opens = 1")
    next_start = F.lead(VALID_FROM).over(by_order)
    prior = F.lag(_KIND).over(by_order)
    is_delete = F.col(_KIND) == DELETE
    opens_key = prior.isNull() if live is None else prior.isNull() & ~F.col(live)
    placed = heads.select(
        *[sql_text.name(c) for c in columns],
        ORDER_COLUMN,
        VALID_FROM,
        F.when(is_delete, F.col(VALID_FROM)).otherwise(next_start).alias(VALID_TO),
        (~is_delete & F.lead(ORDER_COLUMN).over(by_order).isNull()).alias(CURRENT),
        F.when(is_delete, F.lit(DELETE))
        .when(opens_key | (prior == DELETE), F.lit(INSERT))
        .otherwise(F.lit(UPDATE))
        .alias(OP),
        BATCH,
        LAST_ORDER,
        _STORED,
        F.lit(False).alias(_DROP),
        _NEW,
        prior.isNull().alias(_FIRST),
    )
    dropped = grouped.where(f"_h_opens = 0 AND {_STORED}").select(
        *[sql_text.name(c) for c in columns],
        ORDER_COLUMN,
        VALID_FROM,
        F.lit(None).cast("timestamp").alias(VALID_TO),
        F.lit(None).cast("boolean").alias(CURRENT),
        F.lit(None).cast("string").alias(OP),
        BATCH,
        LAST_ORDER,
        _STORED,
        F.lit(True).alias(_DROP),
        F.lit(0).cast("bigint").alias(_NEW),
        F.lit(False).alias(_FIRST),
    )
    return placed.unionByName(dropped)


def _with_newest_values(
    grouped: DataFrame,
    keys: list[str],
    columns: list[str],
    tracked: list[str],
    carried: list[str],
) -> DataFrame:
    """Each row of a version (``_h_version``) with the version's untracked values, batch and
    last order, and how many of its changes are new (not stored); ``carried`` columns go on."""
    # A version takes the untracked values and the batch of its newest change by order (a
    # stored version's newest is its LAST_ORDER, which may be newer than a late change).
    whole = (
        Window.partitionBy(*keys, "_h_version")
        .orderBy(ORDER_COLUMN)
        .rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    )
    untracked = [c for c in columns if c not in tracked and c not in keys]
    newest = F.max_by(
        F.struct(*[F.col(sql_text.name(c)).alias(c) for c in [*untracked, BATCH]]), LAST_ORDER
    ).over(whole)
    return sql_text.select(
        grouped.withColumn("_h_newest", newest)
        .withColumn("_h_last", F.max(LAST_ORDER).over(whole))
        .withColumn(_NEW, F.count(F.when(~F.col(_STORED), 1)).over(whole)),
        [
            *(
                f"_h_newest.{sql_text.name(c)} AS {sql_text.name(c)}"
                if c in untracked or c == BATCH
                else sql_text.name(c)
                for c in [
                    *columns,
                    ORDER_COLUMN,
                    _KIND,
                    VALID_FROM,
                    BATCH,
                    _STORED,
                    "_h_opens",
                    *carried,
                ]
            ),
            f"_h_last AS {LAST_ORDER}",
            _NEW,
        ],
    )


def _merge(
    spark: SparkSession,
    versions: DataFrame,
    identifier: str,
    target: TargetTable,
    written: list[str],
    changing: list[str],
    changes: int,
    table_rows: int,
) -> None:
    """One MERGE of the placed rows into the history table: a version placed among the stored
    ones on (key, ``_cdc_order``); an in-order key's first version on its key's current version
    where it extends it (an upsert of the same ``changing`` values: tracked, not keys), its close
    on that version where it does not, its other versions inserted.

    As the mirror's (``keyed_writes.merge_target``): the MERGE's outer join would shuffle and
    sort every version the table holds to meet a few thousand rows, so the keys of a few
    ``changes`` are listed in its condition (``few_keys``), and more of them, still far fewer
    than the table's ``table_rows``, keep its other rows out by a bloom filter
    (``runtime_filter``)."""
    keys = list(target.keys)
    listed = listed_keys(versions, target, changes, table_rows)
    filtered = not listed and worth_filtering(changes, table_rows)
    # Tables applied at once share the session: each MERGE reads a view of its own.
    view = f"_cdc_history_versions_{next(_views)}"
    source = versions
    if filtered:
        # Spark builds its runtime filter only from a side that reads as a selective filter
        # over a scan (InjectRuntimeFilter), as the mirror's MERGE source is: this IN keeps
        # every row.
        source = unestimated(versions).where(F.col(_DROP).isin(True, False))
    source.createOrReplaceTempView(view)
    role = f"s.{_ROLE}"
    extends = " AND ".join(
        [
            f"s.{OP} <> {sql_text.literal(DELETE)}",
            *(f"t.{quote(c)} <=> s.{quote(c)}" for c in changing),
        ]
    )
    current = f"t.{CURRENT}"
    on = (
        " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
        + f" AND ({role} = '{PLACED}' AND t.{ORDER_COLUMN} = s.{ORDER_COLUMN}"
        + f" OR {role} = '{FIRST}' AND {current} AND {extends}"
        + f" OR {role} = '{CLOSE}' AND {current} AND NOT ({extends}))"
        + listed
    )
    same = " AND ".join(f"t.{quote(c)} <=> s.{quote(c)}" for c in written)
    assignments = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in written)
    # An extended version keeps its start, order and how it began; it takes its newest values.
    untouched = {*keys, *changing, ORDER_COLUMN, VALID_FROM, OP}
    extended = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in written if c not in untouched)
    names = ", ".join(quote(c) for c in written)
    values = ", ".join(f"s.{quote(c)}" for c in written)
    try:
        with bloom_filtered(spark, changes) if filtered else contextlib.nullcontext():
            execute(
                spark,
                f"MERGE INTO {identifier} t USING {view} s ON {on} "
                f"WHEN MATCHED AND {role} = '{PLACED}' AND s.{_DROP} THEN DELETE "
                f"WHEN MATCHED AND {role} = '{PLACED}' AND NOT ({same}) "
                f"THEN UPDATE SET {assignments} "
                f"WHEN MATCHED AND {role} = '{FIRST}' THEN UPDATE SET {extended} "
                f"WHEN MATCHED AND {role} = '{CLOSE}' "
                f"THEN UPDATE SET {VALID_TO} = s.{VALID_FROM}, {CURRENT} = false "
                f"WHEN NOT MATCHED AND {role} <> '{CLOSE}' AND NOT s.{_DROP} "
                f"THEN INSERT ({names}) VALUES ({values})",
            )
    finally:
        spark.catalog.dropTempView(view)
