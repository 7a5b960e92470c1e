"""Server-side SVG charts of the archive pages (inline SVG: no script, no inline style; colours come from classes
in api/static/viewer/network.css). Every plotted element carries a class and data attributes, so a browser test
can count what was drawn and read the values back.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, tzinfo

from markupsafe import Markup, escape

SERIES_CLASSES = 10  # .series-0 ... .series-9 in network.css


@dataclasses.dataclass(frozen=True)
class Series:
    """One line: a value per x position (None where the series has no value, e.g. an account outside that
    snapshot's top 100)."""

    key: str  # what data-key says (an account id)
    label: str
    values: list[int | None]


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def nice_ticks(low: float, high: float, count: int = 4) -> list[float]:
    """About `count` round tick values covering [low, high] (steps of 1, 2 or 5 times a power of ten)."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value < high + step * 0.999:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _time_label(when: datetime, span_seconds: float) -> str:
    """A tick label precise enough to tell the snapshots of this span apart, and no more."""
    if span_seconds < 3600:
        return when.strftime("%H:%M:%S")
    if span_seconds < 2 * 86400:
        return when.strftime("%H:%M")
    return when.strftime("%d %b") if span_seconds < 300 * 86400 else when.strftime("%b %Y")


def history_chart(chart_id: str, title: str, times: list[datetime], series: list[Series], *, zone: tzinfo,
                  value_name: str, width: int = 640, height: int = 280) -> Markup:
    """A line per series over `times` (oldest first): lines join consecutive values only (a gap where a series
    has none), a circle marks each value. X positions follow the times; the y axis fits the values (not from 0:
    the top accounts' counts differ by little compared with their size)."""
    left, right, top, bottom = 52, 14, 14, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for s in series for v in s.values if v is not None]
    parts = [f'<svg class="history-chart" id="{escape(chart_id)}" role="img" aria-label="{escape(title)}" '
             f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMidYMid meet">', f"<title>{escape(title)}</title>"]
    if not values or not times:
        parts.append(f'<text class="empty-note" x="{width / 2}" y="{height / 2}" text-anchor="middle">'
                     "nothing to draw yet</text></svg>")
        return Markup("".join(parts))
    ticks = nice_ticks(min(values), max(values))
    low, high = ticks[0], ticks[-1]
    stamps = [t.timestamp() for t in times]
    t0, t1 = min(stamps), max(stamps)

    def x_of(i: int) -> float:
        return left + plot_w * ((stamps[i] - t0) / (t1 - t0) if t1 > t0 else 0.5)

    def y_of(v: float) -> float:
        return top + plot_h - plot_h * (v - low) / (high - low)

    for tick in ticks:
        y = _num(y_of(tick))
        parts.append(f'<line class="grid" x1="{left}" y1="{y}" x2="{width - right}" y2="{y}"/>')
        parts.append(f'<text class="tick" x="{left - 6}" y="{_num(y_of(tick) + 4)}" text-anchor="end">'
                     f"{int(tick) if tick == int(tick) else tick}</text>")
    parts.append(f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}"/>')
    local = [t.astimezone(zone) for t in times]
    labelled = sorted({round(i * (len(times) - 1) / 4) for i in range(5)}) if len(times) > 1 else [0]
    for i in labelled:
        anchor = "start" if i == 0 and len(times) > 1 else "end" if i == len(times) - 1 and len(times) > 1 \
            else "middle"
        parts.append(f'<text class="tick" x="{_num(x_of(i))}" y="{height - 10}" text-anchor="{anchor}">'
                     f"{escape(_time_label(local[i], t1 - t0))}</text>")
    for k, s in enumerate(series):
        css = f"series-{k % SERIES_CLASSES}"
        run: list[str] = []
        runs: list[list[str]] = []
        for i, v in enumerate(s.values):
            if v is None:
                if run:
                    runs.append(run)
                run = []
            else:
                run.append(f"{_num(x_of(i))},{_num(y_of(v))}")
        if run:
            runs.append(run)
        for points in runs:
            if len(points) > 1:
                parts.append(f'<polyline class="line {css}" data-key="{escape(s.key)}" fill="none" '
                             f'points="{" ".join(points)}"/>')
        for i, v in enumerate(s.values):
            if v is not None:
                when = local[i].strftime("%d %b %Y %H:%M")
                parts.append(f'<circle class="point {css}" data-key="{escape(s.key)}" data-value="{v}" '
                             f'data-taken-at="{escape(times[i].isoformat())}" cx="{_num(x_of(i))}" '
                             f'cy="{_num(y_of(v))}" r="3.5"><title>{escape(s.label)}: {v} {escape(value_name)} '
                             f"({escape(when)})</title></circle>")
    parts.append("</svg>")
    return Markup("".join(parts))
