"""The console's charts, drawn on the server as SVG with pygal (no JavaScript, no CDN).

pygal writes an inline ``<script>`` with its tooltip configuration even when no script
file is loaded (``js=[]``); the console never loads pygal's tooltip script, so that
configuration is dropped and the page's Content-Security-Policy can forbid inline scripts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import pygal
from markupsafe import Markup
from pygal.style import Style

_SCRIPT = re.compile(r"<script\b.*?</script>", re.DOTALL)

_STYLE = Style(
    background="white",
    plot_background="white",
    foreground="#1d2330",
    foreground_strong="#1d2330",
    foreground_subtle="#d9dde5",
    colors=("#2452c7", "#d9822b", "#1d7a3e", "#b3261e"),
    font_family="system-ui, sans-serif",
    label_font_size=11,
    major_label_font_size=11,
    legend_font_size=12,
    title_font_size=14,
    no_data_font_size=18,
)


@dataclass(frozen=True)
class Series:
    """One named line or set of bars."""

    name: str
    values: Sequence[float | None]


def _render(chart: pygal.Graph) -> Markup:
    svg = chart.render(is_unicode=True)
    return Markup(_SCRIPT.sub("", svg))  # pygal's own SVG: it escapes every label


def _options(title: str, x_labels: Sequence[str]) -> dict[str, object]:
    return {
        "js": [],
        "disable_xml_declaration": True,
        "style": _STYLE,
        "width": 900,
        "height": 320,
        "title": title,
        "x_labels": list(x_labels),
        "show_minor_x_labels": False,
        "x_labels_major_every": max(1, len(x_labels) // 8),
        "legend_at_bottom": True,
        "truncate_legend": -1,
        "truncate_label": -1,
        "no_data_text": "no data yet",
        "print_values": False,
    }


def line_chart(title: str, x_labels: Sequence[str], series: Sequence[Series]) -> Markup:
    """A line chart (one line per series) as inline SVG."""
    chart = pygal.Line(**_options(title, x_labels), dots_size=3, show_x_guides=False)
    for one in series:
        chart.add(one.name, list(one.values))
    return _render(chart)


def bar_chart(title: str, x_labels: Sequence[str], series: Sequence[Series]) -> Markup:
    """Grouped bars (one colour per series) as inline SVG."""
    chart = pygal.Bar(**_options(title, x_labels))
    for one in series:
        chart.add(one.name, list(one.values))
    return _render(chart)


def time_label(when: datetime, *, with_date: bool = True) -> str:
    """A short UTC label for a point in time on an axis."""
    return when.strftime("%d %b %H:%M" if with_date else "%H:%M")
