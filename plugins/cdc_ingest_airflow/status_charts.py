"""Small server-side charts of a pipeline's last batches: inline SVG, no script, no CDN.

One bar per batch, oldest on the left, scaled to the largest value shown; a missing value (a batch
that applied no source event has no lag) is a gap. Each ``<svg>`` carries ``data-chart`` (what),
``data-points`` (how many batches) and ``data-max`` (its scale), and a ``<title>`` that a browser
shows on hover and a screen reader reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from cdc_ingest_airflow.status_model import BatchPoint

WIDTH, HEIGHT = 240, 48
CHARTS: tuple[tuple[str, str, Callable[[BatchPoint], float | None]], ...] = (
    ("duration", "duration (s)", lambda b: b.duration_s),
    ("rows", "rows applied", lambda b: float(b.rows_applied)),
    ("dead-letters", "dead letters", lambda b: float(b.dead_lettered)),
    ("lag", "lag at commit (s)", lambda b: b.lag_s),
)


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def bar_chart(name: str, label: str, values: Sequence[float | None]) -> str:
    """One chart's ``<figure>``."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0)
    slot = WIDTH / max(len(values), 1)
    bars = []
    for i, value in enumerate(values):
        if value is None:
            continue
        height = 0.0 if top <= 0 else max(1.0, value / top * (HEIGHT - 2))
        bars.append(
            f'<rect x="{i * slot + 0.5:.1f}" y="{HEIGHT - height:.1f}" '
            f'width="{max(slot - 1, 1):.1f}" height="{height:.1f}"></rect>'
        )
    last = _number(known[-1]) if known else "—"
    title = f"{label}, last {len(values)} batches: newest {last}, max {_number(top)}"
    return (
        '<figure class="chart">'
        f'<svg data-chart="{escape(name)}" data-points="{len(values)}" data-max="{_number(top)}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">'
        f"<title>{escape(title)}</title>{''.join(bars)}</svg>"
        f"<figcaption>{escape(label)}: {last} (max {_number(top)})</figcaption></figure>"
    )


def history_charts(history: Sequence[BatchPoint]) -> str:
    """The pipeline's four charts, or a line saying there is nothing to chart."""
    if not history:
        return "<p>No batches to chart.</p>"
    figures = "".join(bar_chart(n, label, [get(b) for b in history]) for n, label, get in CHARTS)
    return f'<div class="charts">{figures}</div>'
