"""The report as an HTML page: tables and charts drawn server-side as inline SVG (no script, no external asset:
the page works offline and prints). Every chart element carries a class and data attributes, so a browser
test can count bars and points.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_ENV = Environment(loader=PackageLoader("api", "templates"), autoescape=select_autoescape(["html"]),
                   trim_blocks=True, lstrip_blocks=True)
_SERIES = (("value", "this period"), ("previous", "previous period"))


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _figure(title: str, parts: list[str]) -> Markup:
    return Markup(f'<figure><figcaption>{escape(title)}</figcaption>{"".join(parts)}</svg></figure>')


def bar_chart(chart_id: str, title: str, labels: list[str], figures: list[dict[str, Any]], *,
              width: int = 720, height: int = 220) -> Markup:
    """Vertical bars, this period next to the previous one, for each label."""
    pad_left, pad_bottom, pad_top = 36, 28, 24
    plot_w, plot_h = width - pad_left - 8, height - pad_bottom - pad_top
    top = max([f["value"] or 0 for f in figures] + [f["previous"] or 0 for f in figures] + [1])
    slot = plot_w / max(len(labels), 1)
    bar_w = max(slot * 0.38, 1.0)
    parts = [f'<svg class="chart" id="{escape(chart_id)}" role="img" aria-label="{escape(title)}" '
             f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
             f'<title>{escape(title)}</title>',
             f'<line class="axis" x1="{pad_left}" y1="{pad_top + plot_h}" x2="{width - 8}" y2="{pad_top + plot_h}"/>',
             f'<text class="tick" x="{pad_left - 4}" y="{pad_top + 4}" text-anchor="end">{top}</text>',
             f'<text class="tick" x="{pad_left - 4}" y="{pad_top + plot_h}" text-anchor="end">0</text>']
    for i, (label, figure) in enumerate(zip(labels, figures, strict=True)):
        x0 = pad_left + i * slot + slot * 0.1
        for j, (key, series) in enumerate(_SERIES):
            v = figure[key] or 0
            h = plot_h * v / top
            parts.append(f'<rect class="bar bar-{key}" data-series="{key}" data-label="{escape(label)}" '
                         f'data-value="{v}" x="{_num(x0 + j * bar_w)}" y="{_num(pad_top + plot_h - h)}" '
                         f'width="{_num(bar_w)}" height="{_num(h)}"><title>{escape(label)} ({series}): {v}'
                         f'</title></rect>')
        parts.append(f'<text class="tick" x="{_num(x0 + bar_w)}" y="{height - 10}" text-anchor="middle">'
                     f'{escape(label)}</text>')
    return _figure(title, parts)


def hbar_chart(chart_id: str, title: str, items: list[tuple[str, dict[str, Any]]], *, width: int = 720) -> Markup:
    """Horizontal bars (a ranking), this period with the previous period as a thin bar under it."""
    row_h, label_w = 22, 190
    height = row_h * len(items) + 10
    top = max([f["value"] or 0 for _, f in items] + [f["previous"] or 0 for _, f in items] + [1])
    plot_w = width - label_w - 60
    parts = [f'<svg class="chart" id="{escape(chart_id)}" role="img" aria-label="{escape(title)}" '
             f'viewBox="0 0 {width} {height}" width="{width}" height="{height}"><title>{escape(title)}</title>']
    for i, (label, figure) in enumerate(items):
        y = 5 + i * row_h
        v, p = figure["value"] or 0, figure["previous"] or 0
        parts.append(f'<text class="label" x="{label_w - 6}" y="{y + 13}" text-anchor="end">{escape(label)}</text>')
        parts.append(f'<rect class="bar bar-value" data-series="value" data-label="{escape(label)}" data-value="{v}" '
                     f'x="{label_w}" y="{y}" width="{_num(plot_w * v / top)}" height="{row_h - 9}"/>')
        parts.append(f'<rect class="bar bar-previous" data-series="previous" data-label="{escape(label)}" '
                     f'data-value="{p}" x="{label_w}" y="{y + row_h - 9}" width="{_num(plot_w * p / top)}" '
                     f'height="3"/>')
        parts.append(f'<text class="value" x="{_num(label_w + plot_w * v / top + 4)}" y="{y + 11}">{v}</text>')
    return _figure(title, parts)


def heatmap(chart_id: str, title: str, matrix: list[list[int]]) -> Markup:
    """7 x 24 cells (weekday x hour), darker = more messages."""
    cell, left, top_pad = 26, 40, 18
    width, height = left + 24 * cell + 4, top_pad + 7 * cell + 4
    peak = max([max(row) for row in matrix] + [1])
    parts = [f'<svg class="chart" id="{escape(chart_id)}" role="img" aria-label="{escape(title)}" '
             f'viewBox="0 0 {width} {height}" width="{width}" height="{height}"><title>{escape(title)}</title>']
    for h in range(0, 24, 3):
        parts.append(f'<text class="tick" x="{left + h * cell + cell / 2}" y="12" text-anchor="middle">{h}</text>')
    for d, row in enumerate(matrix):
        parts.append(f'<text class="tick" x="{left - 6}" y="{top_pad + d * cell + 17}" text-anchor="end">'
                     f'{WEEKDAYS[d]}</text>')
        for h, n in enumerate(row):
            opacity = 0.06 + 0.94 * n / peak if n else 0.03
            parts.append(f'<rect class="cell" data-weekday="{d}" data-hour="{h}" data-value="{n}" '
                         f'x="{left + h * cell}" y="{top_pad + d * cell}" width="{cell - 2}" height="{cell - 2}" '
                         f'fill-opacity="{opacity:.3f}"><title>{WEEKDAYS[d]} {h:02d}:00 UTC: {n}</title></rect>')
    return _figure(title, parts)


def line_chart(chart_id: str, title: str, series: list[tuple[str, list[tuple[float, int]]]], *,
               width: int = 720, height: int = 200) -> Markup:
    """One polyline per series of (time, value) points; each point is a circle."""
    points = [p for _, s in series for p in s]
    parts = [f'<svg class="chart" id="{escape(chart_id)}" role="img" aria-label="{escape(title)}" '
             f'viewBox="0 0 {width} {height}" width="{width}" height="{height}"><title>{escape(title)}</title>']
    if points:
        t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
        v1 = max([v for _, v in points] + [1])
        left, pad = 40, 16

        def xy(t: float, v: int) -> tuple[float, float]:
            x = left + (width - left - pad) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.5)
            return x, height - pad - (height - 2 * pad) * v / v1

        parts.append(f'<text class="tick" x="{left - 4}" y="{pad + 4}" text-anchor="end">{v1}</text>')
        for k, (name, s) in enumerate(series):
            coords = [xy(t, v) for t, v in sorted(s)]
            parts.append(f'<polyline class="line series-{k % 6}" data-series="{escape(name)}" fill="none" '
                         f'points="{" ".join(f"{_num(x)},{_num(y)}" for x, y in coords)}"/>')
            for (x, y), (_, v) in zip(coords, sorted(s), strict=True):
                parts.append(f'<circle class="point series-{k % 6}" data-series="{escape(name)}" data-value="{v}" '
                             f'cx="{_num(x)}" cy="{_num(y)}" r="3"><title>{escape(name)}: {v}</title></circle>')
    return _figure(title, parts)


def context(document: dict[str, Any], *, top_rows: int = 15,
            message_href: Callable[[dict[str, Any]], str | None] | None = None) -> dict[str, Any]:
    """What slack/_report_sections.html needs: the document, its names, the charts drawn. `message_href` links a
    top message (default: its REST address, `ref`; an anonymised report has none)."""
    names = document.get("names", {})
    users, chans = names.get("users", {}), names.get("channels", {})
    activity = document["activity"]
    hours = [f"{h:02d}" for h in range(24)]
    members = []
    for m in document.get("members", []):
        members.append((chans.get(m["channel"], m["channel"]),
                        [(float(o["at"]), o["members"]) for o in m["observations"]]))
    charts = {
        "utc_weekday": bar_chart("chart-utc-weekday", "Messages by weekday (UTC)", list(WEEKDAYS),
                                 activity["utc_weekday"]),
        "utc_hour": bar_chart("chart-utc-hour", "Messages by hour (UTC)", hours, activity["utc_hour"]),
        "weekday_hours_utc": bar_chart("chart-weekday-hours-utc", "Monday–Friday by hour (UTC)", hours,
                                       activity["weekday_hours_utc"]),
        "local_weekday": bar_chart("chart-local-weekday", "Messages by the author's local weekday",
                                   list(WEEKDAYS), activity["local_weekday"]),
        "local_hour": bar_chart("chart-local-hour", "Messages by the author's local hour", hours,
                                activity["local_hour"]),
        "heatmap": heatmap("chart-heatmap", "Weekday × hour (UTC)", activity["utc_weekday_hour"]["value"]),
        "channels": hbar_chart("chart-channels", "Messages per channel",
                               [(f"#{chans.get(c['channel'], c['channel'])}", c["messages"])
                                for c in document["channels"][:top_rows]]),
        "posters": hbar_chart("chart-posters", "Messages per user",
                              [(users.get(r["user"], r["user"]), r["messages"])
                               for r in document["users"]["rows"][:top_rows]]),
        "members": line_chart("chart-members", "Channel members over time", members) if members else None,
    }
    return {"doc": document, "users": users, "channels": chans, "charts": charts, "weekdays": WEEKDAYS,
            "top_rows": top_rows, "message_href": message_href or (lambda m: m.get("ref"))}


def html(document: dict[str, Any], *, top_rows: int = 15) -> str:
    """The whole page of a report document (anonymised or not)."""
    return _ENV.get_template("slack/report.html").render(**context(document, top_rows=top_rows))
