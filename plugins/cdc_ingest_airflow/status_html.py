"""The status page as one server-rendered HTML document: no script, every value escaped.

Each pipeline is a ``<section id="pipeline-<name>">``; values carry ``data-field`` attributes
and table rows ``data-table``/``data-dead-letter``/``data-ddl`` so that scripts and tests can
find them without depending on the layout. Links are relative (``status.json``), so the page
works under any ``[api] base_url`` and inside the Airflow UI's iframe.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from html import escape

from cdc_ingest_airflow.status_charts import history_charts
from cdc_ingest_airflow.status_health import RECENT_BATCHES, duration, worst_first
from cdc_ingest_airflow.status_model import Overview, PipelineStatus, TableStatus

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1rem 1.5rem; color: #1a202c; }
section { border: 1px solid #cbd5e0; border-radius: 6px; padding: 0.5rem 1rem; margin: 1rem 0; }
table { border-collapse: collapse; margin: 0.5rem 0; }
th, td { border: 1px solid #e2e8f0; padding: 2px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; white-space: nowrap; }
.problem { color: #9b2c2c; font-weight: 600; }
code, .raw { font-family: ui-monospace, monospace; font-size: 0.85em; word-break: break-all; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 12px; }
dt { font-weight: 600; }
.charts { display: flex; flex-wrap: wrap; gap: 0 1.5rem; }
figure.chart { margin: 0.25rem 0; }
figure.chart rect { fill: #4a5568; }
figure.chart svg { background: #edf2f7; }
figcaption { font-size: 0.8em; color: #4a5568; }
td.health { font-weight: 600; }
tr[data-health="failing"] td.health, tr[data-health="stuck"] td.health { color: #9b2c2c; }
tr[data-health="lagging"] td.health, tr[data-health="dead letters"] td.health { color: #975a16; }
tr[data-health="ok"] td.health { color: #276749; }
"""


def _text(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
    if isinstance(value, float):
        return f"{value:.1f}"
    return escape(str(value))


def _lag(seconds: float | None) -> str:
    return "—" if seconds is None else duration(seconds)


def _field(name: str, value: object, label: str) -> str:
    return f'<dt>{escape(label)}</dt><dd data-field="{name}">{_text(value)}</dd>'


def _table(columns: Iterable[str], rows: list[str], empty: str) -> str:
    if not rows:
        return f"<p>{escape(empty)}</p>"
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _cells(*values: object, numeric: int = 0) -> str:
    """``<td>`` cells; the last ``numeric`` are right-aligned."""
    first = len(values) - numeric
    return "".join(
        f"<td{' class=num' if i >= first else ''}>{_text(v)}</td>" for i, v in enumerate(values)
    )


def _history(t: TableStatus) -> str:
    """Where a table keeps its versions (``history: scd2``), and how many."""
    if t.history is None:
        return ""
    return t.history + (" (not yet)" if t.history_rows is None else f" ({t.history_rows} versions)")


def _files(t: TableStatus) -> str:
    """The table's delete files against its data files (``2 on 5 data files``): what each read
    merges until ``maintain`` compacts them; and whether its triggers make maintenance due."""
    if t.data_files is None or t.delete_files is None:
        return ""
    due = "" if t.maintenance_due is None else f"; maintenance due: {t.maintenance_due}"
    return f"{t.delete_files} on {t.data_files} data files{due}"


def _expectations(t: TableStatus) -> str:
    """Each expectation's violations in the table's last batch: ``positive_qty: 2 (drop)``."""
    counted = sorted(t.expectations.items())
    return ", ".join(f"{rule}: {changes} ({action})" for rule, (action, changes) in counted)


def _tables(p: PipelineStatus) -> str:
    rows = [
        f'<tr data-table="{escape(t.name)}">'
        + _cells(
            t.name,
            t.rows if t.exists else "not in catalog",
            t.batch_id,
            t.inserted,
            t.updated,
            t.deleted,
            t.dead_lettered,
            numeric=6,
        )
        + _cells(_files(t), _history(t), _expectations(t))
        + "</tr>"
        for t in p.tables
    ]
    columns = (
        "table",
        "rows",
        "last batch",
        "inserted",
        "updated",
        "deleted",
        "dead letters",
        "delete files",
        "history",
        "expectations",
    )
    return "<h3>Tables</h3>" + _table(columns, rows, "No tables yet.")


def _checkpoint_and_batch(p: PipelineStatus) -> str:
    c, b = p.checkpoint, p.last_batch
    fields = [
        _field("last-committed-batch", c.last_batch_id if c else None, "Last committed batch"),
        _field("committed-at", c.committed_at if c else None, "Committed at"),
        _field("files-applied", c.files_applied if c else None, "Files applied"),
        _field("duplicates", c.duplicates if c else None, "Duplicate files skipped"),
    ]
    if c and c.awaiting_resume is not None:
        fields.append(_field("awaiting-resume", c.awaiting_resume, "Planned batch to resume"))
    fields += [
        _field("pending-files", p.pending_count, "Files pending"),
        _field("freshness", p.freshness, "Newest source event applied"),
        f'<dt>Freshness lag</dt><dd data-field="freshness-lag">{_lag(p.freshness_lag_s)}</dd>',
    ]
    html = "<h3>Checkpoints</h3><dl>" + "".join(fields) + "</dl>"
    if p.pending_files:
        items = "".join(f"<li><code>{escape(f)}</code></li>" for f in p.pending_files)
        html += (
            "<details><summary>Pending files</summary>"
            f'<ul data-field="pending-list">{items}</ul></details>'
        )
    html += "<h3>Last batch</h3>"
    if b is None:
        return html + "<p>No batch recorded.</p>"
    return (
        html
        + "<dl>"
        + _field("batch-id", b.batch_id, "Batch")
        + (_field("partial", "yes (--tables run)", "Partial") if b.partial else "")
        + _field("run-id", b.run_id, "Run id")
        + _field("finished-at", b.finished_at, "Finished at")
        + _field("duration", b.duration_s, "Duration (s)")
        + _field("batch-files", b.files, "Files")
        + _field("batch-lines", b.lines, "Lines")
        + _field("batch-messages", b.messages, "Messages")
        + _field("batch-inserted", b.inserted, "Inserted")
        + _field("batch-updated", b.updated, "Updated")
        + _field("batch-deleted", b.deleted, "Deleted")
        + _field("batch-dead-lettered", b.dead_lettered, "Dead-lettered")
        + _field("batch-ddl", b.ddl_recorded, "DDL recorded")
        + "</dl>"
    )


def _dead_letters(p: PipelineStatus) -> str:
    rows = [
        "<tr data-dead-letter>"
        + _cells(d.batch_id, d.file, d.line, d.target_table, d.reason)
        + f'<td class="raw">{_text(d.raw)}</td></tr>'
        for d in p.dead_letters
    ]
    title = (
        f'<h3>Dead letters (<span data-field="dead-letters-total">{p.dead_letters_total}</span>'
        " in all; the newest batches')</h3>"
    )
    columns = ("batch", "file", "line", "table", "reason", "raw")
    return title + _table(columns, rows, "No dead letters.")


def _ddl(p: PipelineStatus) -> str:
    rows = [
        "<tr data-ddl>"
        + _cells(d.batch_id, d.target_table, d.event_time)
        + f"<td><code>{_text(d.statement)}</code></td>"
        + _cells(d.status, d.detail)
        + "</tr>"
        for d in p.ddl_history
    ]
    columns = ("batch", "table", "event time", "statement", "status", "detail")
    return "<h3>DDL history</h3>" + _table(columns, rows, "No DDL recorded.")


def _pipeline(p: PipelineStatus) -> str:
    problems = "".join(f'<p class="problem" data-problem>{escape(m)}</p>' for m in p.problems)
    return (
        f'<section id="pipeline-{escape(p.name)}" data-pipeline="{escape(p.name)}">'
        f"<h2>{escape(p.name)}</h2>"
        + problems
        + "<dl>"
        + _field("format", p.format, "Format")
        + _field("landing", p.landing, "Landing")
        + _field("namespace", p.namespace, "Namespace")
        + _field("dag", p.dag_id, "DAG")
        + _field("health", p.health, "Health")
        + "</dl>"
        + "<h3>Last batches</h3>"
        + history_charts(p.history)
        + _tables(p)
        + _checkpoint_and_batch(p)
        + _dead_letters(p)
        + _ddl(p)
        + "</section>"
    )


def _overview(pipelines: list[PipelineStatus]) -> str:
    """One row per pipeline, the worst first: what on-call reads before anything else."""
    rows = []
    for p in worst_first(pipelines):
        last = p.last_batch
        recent = sum(b.dead_lettered for b in p.history[-RECENT_BATCHES:])
        rows.append(
            f'<tr data-overview data-health="{escape(p.health)}">'
            f'<td><a href="#pipeline-{escape(p.name)}">{escape(p.name)}</a></td>'
            f'<td class="health">{escape(p.health)}</td>'
            + _cells(
                "; ".join(p.health_reasons) or None,
                _lag(p.freshness_lag_s),
                p.pending_count,
                last.batch_id if last else None,
                last.finished_at if last else None,
                recent,
                numeric=5,
            )
            + "</tr>"
        )
    columns = (
        "pipeline",
        "health",
        "why",
        "lag",
        "files pending",
        "last batch",
        "finished at",
        f"dead letters (last {RECENT_BATCHES} batches)",
    )
    return "<h2>Overview</h2>" + _table(columns, rows, "No pipelines.")


def render(overview: Overview) -> str:
    """The whole page."""
    header = (
        "<h1>cdc-ingest pipelines</h1><p>"
        f'Pipelines file <code data-field="config">{_text(overview.config_path)}</code>, '
        f'catalog <code data-field="catalog">{_text(overview.catalog)}</code>, '
        f'read <span data-field="generated-at">{_text(overview.generated_at)}</span>. '
        '<a href="status.json">JSON</a></p>'
    )
    if overview.error:
        header += f'<p class="problem" data-field="error">{escape(overview.error)}</p>'
    body = _overview(overview.pipelines) + "".join(_pipeline(p) for p in overview.pipelines)
    if not overview.pipelines and not overview.error:
        body = "<p>No pipelines are visible to you.</p>"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>cdc-ingest pipelines</title>"
        f"<style>{STYLE}</style></head><body>{header}{body}</body></html>"
    )
