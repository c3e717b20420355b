"""What the ingest task reports once its batch is applied: the batch's summary (read back from
``_cdc_batches`` with pyiceberg), one asset event per table the batch changed, the maintenance
asset's event when the batch left a table due for maintenance, and the batch's metrics through
Airflow's metrics client."""

from __future__ import annotations

from typing import Any

from cdc_ingest.config import load_config

from cdc_ingest_airflow.assets import emit_maintenance_due, emit_table_events, maintenance_asset
from cdc_ingest_airflow.lake_state import batch_summary, batch_tables, pending
from cdc_ingest_airflow.metrics import send_batch_metrics


def report_batch(
    context: Any, config_path: str, pipeline_name: str, catalog: str, namespace: str, log: Any
) -> dict[str, Any]:
    """Report the batch of this task's run (``context``'s run id); returns its summary."""
    summary = batch_summary(config_path, pipeline_name, context["run_id"], dry_run=False)
    try:
        snapshots, due = batch_tables(config_path, summary)
    except Exception as exc:  # the batch is applied: its events go out without them
        log.warning("the batch's tables could not be read: %s", exc)
        snapshots, due = {}, {}
    uris = emit_table_events(
        context["outlet_events"], pipeline_name, catalog, namespace, summary, snapshots
    )
    log.info("asset events: %s", ", ".join(uris) or "none (no table changed)")
    due_asset = maintenance_asset(pipeline_name)
    if emit_maintenance_due(context["outlet_events"], pipeline_name, due):
        for table, why in sorted(due.items()):
            log.info("maintenance due: %s: %s", table, why)
        log.info("asset event: %s (maintain_%s runs on it)", due_asset.name, pipeline_name)
    if summary.get("batch_id") is not None:
        waiting = pending(load_config(config_path), pipeline_name)
        sent = send_batch_metrics(summary, len(waiting.files))
        log.info("metrics: %d sent through Airflow's metrics client", sent)
    return summary
