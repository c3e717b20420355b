"""Small server-side charts of a pipeline's last batches: inline SVG, no script, no CDN.

One bar per batch, oldest on the left, scaled to the largest value shown; a missing value (a batch
that applied no source event has no lag) is a gap. Each ``<svg>`` carries ``data-chart`` (what),
``data-points`` (how many batches) and ``data-max`` (its scale), and a ``<title>`` that a browser
shows on hover and a screen reader reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from cdc_ingest_airflow.status_health import duration
from cdc_ingest_airflow.status_model import BatchPoint

WIDTH, HEIGHT = 240, 48
# Bars are never wider than a 20th of the chart, so that a few batches do not look like many.
MIN_SLOTS = 20


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def _seconds(value: float) -> str:
    return _number(value) + " s" if value < 60 else duration(value)


CHARTS: tuple[
    tuple[str, str, Callable[[BatchPoint], float | None], Callable[[float], str]], ...
] = (
    ("duration", "duration", lambda b: b.duration_s, _seconds),
    ("rows", "rows applied", lambda b: float(b.rows_applied), _number),
    ("dead-letters", "dead letters", lambda b: float(b.dead_lettered), _number),
    ("lag", "lag at commit", lambda b: b.lag_s, _seconds),
)


def bar_chart(
    name: str, label: str, values: Sequence[float | None], shown: Callable[[float], str] = _number
) -> str:
    """One chart's ``<figure>``; ``shown`` formats its values for people."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0)
    slot = WIDTH / max(len(values), MIN_SLOTS)
    bars = []
    for i, value in enumerate(values):
        if value is None:
            continue
        height = 0.0 if top <= 0 else max(1.0, value / top * (HEIGHT - 2))
        bars.append(
            f'<rect x="{i * slot + 0.5:.1f}" y="{HEIGHT - height:.1f}" '
            f'width="{max(slot - 1, 1):.1f}" height="{height:.1f}"></rect>'
        )
    last = shown(known[-1]) if known else "—"
    title = f"{label}, last {len(values)} batches: newest {last}, max {shown(top)}"
    return (
        '<figure class="chart">'
        f'<svg data-chart="{escape(name)}" data-points="{len(values)}" data-max="{_number(top)}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">'
        f"<title>{escape(title)}</title>{''.join(bars)}</svg>"
        f"<figcaption>{escape(label)}: {last} (max {shown(top)})</figcaption></figure>"
    )


def history_charts(history: Sequence[BatchPoint]) -> str:
    """The pipeline's four charts, or a line saying there is nothing to chart."""
    if not history:
        return "<p>No batches to chart.</p>"
    figures = "".join(
        bar_chart(name, label, [get(b) for b in history], shown)
        for name, label, get, shown in CHARTS
    )
    return f'<div class="charts">{figures}</div>'
