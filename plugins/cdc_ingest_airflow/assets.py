"""Mirrored Iceberg tables as Airflow assets: one event per table a batch changed.

No installed provider defines a URI scheme for Iceberg tables, so the assets follow one documented,
stable scheme over the catalog, namespace and table names: ``iceberg://<catalog>/<namespace>/<table>``
(the catalog's name in the pipelines file). A downstream DAG schedules on one table with
``schedule=[Asset("iceberg://lake/ods/orders")]``. The tables a stream creates are only known at
run time, so ``apply_batch`` declares an asset alias per pipeline (``cdc_ingest.<pipeline>``) and
attaches each event to the table's asset through it. Each event's ``extra`` holds the batch's
counts for that table.

A batch that leaves a table's reads needing maintenance (``maintenance.triggers``) also emits an
event of the pipeline's maintenance asset (``cdc_ingest.maintenance_due.<pipeline>``), through an
alias of its own so that batches owing nothing emit none; ``maintain_<pipeline>`` is scheduled on
that asset as well as on its schedule. The event's ``extra`` names each due table and why.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from airflow.sdk import Asset, AssetAlias

SCHEME = "iceberg"


def table_uri(catalog: str, namespace: str, table: str) -> str:
    """``iceberg://<catalog>/<namespace>/<table>``: the asset of one mirrored table."""
    return f"{SCHEME}://{catalog}/{namespace}/{table}"


def pipeline_alias(pipeline: str) -> AssetAlias:
    """The alias through which a pipeline's ``apply_batch`` emits its tables' events."""
    return AssetAlias(name=f"cdc_ingest.{pipeline}")


def maintenance_asset(pipeline: str) -> Asset:
    """The asset whose events make ``maintain_<pipeline>`` run: a batch left a table due."""
    return Asset(name=f"cdc_ingest.maintenance_due.{pipeline}")


def maintenance_alias(pipeline: str) -> AssetAlias:
    """The alias through which ``apply_batch`` emits the maintenance asset's event, when due."""
    return AssetAlias(name=f"cdc_ingest.{pipeline}.maintenance_due")


def ingest_outlets(pipeline: str, maintenance_triggered: bool) -> list[AssetAlias]:
    """``apply_batch``'s outlets: the pipeline's tables' alias, and the maintenance asset's
    alias when its ``maintenance.triggers`` are set."""
    outlets = [pipeline_alias(pipeline)]
    return [*outlets, maintenance_alias(pipeline)] if maintenance_triggered else outlets


def emit_maintenance_due(outlet_events: Any, pipeline: str, due: Mapping[str, str]) -> bool:
    """Emit the pipeline's maintenance event if ``due`` names a table (table: why); returns
    whether it did."""
    if not due:
        return False
    extra = {"pipeline": pipeline, "due": dict(sorted(due.items()))}
    outlet_events[maintenance_alias(pipeline)].add(maintenance_asset(pipeline), extra=extra)
    return True


def table_events(
    summary: Mapping[str, Any], snapshots: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """The event ``extra`` of each table the batch changed (rows written, or the table created).

    Args:
        summary: the batch's ``RunSummary`` as recorded in ``_cdc_batches``.
        snapshots: per table, the snapshots the batch committed (``lake_state.batch_tables``):
            ``snapshots``, ``previous_snapshot``, and ``history_table``/``history_snapshots``
            for a table that keeps history; a downstream DAG reads exactly what the batch
            changed between them.
    """
    if summary.get("batch_id") is None or summary.get("dry_run"):
        return {}
    freshness_ms = summary.get("freshness_ms")
    freshness = (
        dt.datetime.fromtimestamp(freshness_ms / 1000, dt.UTC).isoformat()
        if isinstance(freshness_ms, int | float)
        else None
    )
    events: dict[str, dict[str, Any]] = {}
    for name, counts in sorted((summary.get("tables") or {}).items()):
        # A late change may leave the mirror as it was and still add to its history.
        written = ("inserted", "updated", "deleted", "history_changes")
        changed = sum(int(counts.get(k) or 0) for k in written)
        if not changed and not counts.get("created"):
            continue
        events[name] = {
            "pipeline": summary.get("pipeline"),
            "batch_id": summary["batch_id"],
            "inserted": counts.get("inserted", 0),
            "updated": counts.get("updated", 0),
            "deleted": counts.get("deleted", 0),
            "dead_lettered": counts.get("dead_lettered", 0),
            "freshness": freshness,
            **(snapshots or {}).get(name, {}),
        }
    return events


def emit_table_events(
    outlet_events: Any,
    pipeline: str,
    catalog: str,
    namespace: str,
    summary: Mapping[str, Any],
    snapshots: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """Add one asset event per changed table to the task's ``outlet_events``; returns the URIs."""
    alias = outlet_events[pipeline_alias(pipeline)]
    uris = []
    for table, extra in table_events(summary, snapshots).items():
        uri = table_uri(catalog, namespace, table)
        alias.add(Asset(uri), extra=extra)
        uris.append(uri)
    return uris
