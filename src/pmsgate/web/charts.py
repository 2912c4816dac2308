"""The console's charts, drawn on the server as SVG with pygal (no JavaScript, no CDN).

Each chart says what it measures, in which unit, over which period:

- the time axis is computed here (:func:`time_ticks`, :func:`time_format`): a handful of
  round instants spanning the data, labelled so that no two labels read the same (minutes
  for a span of hours, days for a span of weeks); a single point, or points taken within
  the same minute, get a window around them instead of a zero-width axis;
- the value axis starts at zero and has round ticks (:func:`nice_ticks`) with the unit in
  its title; money has its own chart and axis (never scaled into a count);
- a chart with nothing to draw is not drawn: :class:`Chart` carries the sentence the page
  shows instead (its empty state).

pygal writes an inline ``<script>`` with its tooltip configuration even when no script
file is loaded (``js=[]``); the console never loads pygal's tooltip script, so that
configuration is dropped and the page's Content-Security-Policy can forbid inline scripts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pygal
from markupsafe import Markup
from pygal.style import Style

_SCRIPT = re.compile(r"<script\b.*?</script>", re.DOTALL)

# Colours with at least 4.5:1 contrast on white (the legend's and labels' text).
_STYLE = Style(
    background="white",
    plot_background="white",
    foreground="#1d2330",
    foreground_strong="#1d2330",
    foreground_subtle="#c9ced8",
    colors=("#2452c7", "#a3530f", "#1d7a3e", "#b3261e"),
    font_family="system-ui, sans-serif",
    label_font_size=12,
    major_label_font_size=12,
    legend_font_size=13,
    title_font_size=15,
    no_data_font_size=16,
)

# Round steps for a time axis, shortest first.
_TIME_STEPS = tuple(
    timedelta(minutes=m)
    for m in (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080, 20160)
)
# The window drawn around data that spans (almost) no time: a single snapshot.
_MIN_SPAN = timedelta(hours=1)


@dataclass(frozen=True)
class Series:
    """One named line or set of bars."""

    name: str
    values: Sequence[float | None]


@dataclass(frozen=True)
class Chart:
    """A chart as the page shows it: the SVG, or the sentence saying why there is none."""

    title: str
    svg: Markup | None
    empty: str
    summary: str = ""  # one sentence a screen reader gets (and the page shows under it)

    @property
    def drawn(self) -> bool:
        """Whether there is an SVG to show."""
        return self.svg is not None


# --- axes ---------------------------------------------------------------------------------------


def nice_ticks(high: float, *, count: int = 5) -> list[float]:
    """Round ticks from 0 to at least ``high``: about ``count`` steps of 1, 2, 2.5 or 5 x 10^n.

    ``high`` ≤ 0 (nothing counted yet) gives 0 and 1, so the axis still has a scale.
    """
    if not math.isfinite(high) or high <= 0:
        return [0.0, 1.0]
    raw = high / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    intervals = math.ceil(high / step - 1e-9)
    return [round(i * step, 10) for i in range(intervals + 1)]


def time_span(points: Sequence[datetime]) -> tuple[datetime, datetime]:
    """The instants the time axis covers: the data's first and last, at least an hour apart."""
    if not points:
        raise ValueError("a time axis needs at least one point")
    first, last = min(points), max(points)
    if last - first < _MIN_SPAN:
        middle = first + (last - first) / 2
        first, last = middle - _MIN_SPAN / 2, middle + _MIN_SPAN / 2
    return first, last


def time_ticks(first: datetime, last: datetime, *, count: int = 6) -> list[datetime]:
    """Round instants within [first, last], at most ``count`` + 1 of them, evenly spaced."""
    span = last - first
    step = next((s for s in _TIME_STEPS if span / s <= count), None)
    if step is None:
        step = timedelta(days=math.ceil(span / timedelta(days=1) / count))
    epoch = datetime(2000, 1, 3, tzinfo=UTC)  # a Monday: week steps start on Mondays
    start = first.astimezone(UTC)
    offset = (start - epoch) % step
    tick = start if offset == timedelta(0) else start - offset + step
    ticks = []
    while tick <= last.astimezone(UTC):
        ticks.append(tick)
        tick += step
    return ticks


def time_format(ticks: Sequence[datetime]) -> str:
    """The shortest strftime format under which the ticks' labels all differ."""
    for fmt in ("%H:%M", "%d %b", "%d %b %H:%M", "%Y-%m-%d %H:%M"):
        labels = [t.astimezone(UTC).strftime(fmt) for t in ticks]
        if len(set(labels)) == len(labels) and (fmt != "%d %b" or _whole_days(ticks)):
            if fmt == "%H:%M" and len({t.date() for t in ticks}) > 1:
                continue  # hours of two days: the day must show
            return fmt
    return "%Y-%m-%d %H:%M"


def _whole_days(ticks: Sequence[datetime]) -> bool:
    return all(t.astimezone(UTC).time() == datetime.min.time() for t in ticks)


def time_labels(ticks: Sequence[datetime]) -> list[str]:
    """The ticks' labels (UTC), all distinct."""
    fmt = time_format(ticks)
    return [t.astimezone(UTC).strftime(fmt) for t in ticks]


def count_label(value: float) -> str:
    """A count on an axis: 1,200 (never 1200.0)."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def usd_label(value: float) -> str:
    """An amount of US dollars on an axis: $12.50."""
    return f"${value:,.2f}"


# --- drawing ------------------------------------------------------------------------------------


def _render(chart: pygal.Graph) -> Markup:
    svg = chart.render(is_unicode=True)
    return Markup(_SCRIPT.sub("", svg))  # pygal's own SVG: it escapes every label


def _options(
    title: str, y_title: str, ticks: list[float], y_format: Callable[[float], str]
) -> dict[str, object]:
    return {
        "js": [],
        "disable_xml_declaration": True,
        "style": _STYLE,
        "width": 900,
        "height": 340,
        "title": title,
        "y_title": y_title,
        "y_labels": ticks,
        "range": (0, ticks[-1]),
        "value_formatter": y_format,
        "legend_at_bottom": True,
        "truncate_legend": -1,
        "truncate_label": -1,
        "no_data_text": "",
        "print_values": False,
        "show_y_guides": True,
        "show_x_guides": False,
    }


def _highest(series: Sequence[Series]) -> float:
    values = [v for one in series for v in one.values if v is not None]
    return max(values, default=0.0)


def time_chart(
    title: str,
    times: Sequence[datetime],
    series: Sequence[Series],
    *,
    unit: str,
    empty: str,
    y_format: Callable[[float], str] = count_label,
) -> Chart:
    """Lines over real time (one per series); the empty state when there is no point."""
    if not times:
        return Chart(title=title, svg=None, empty=empty)
    first, last = time_span(times)
    ticks = time_ticks(first, last)
    fmt = time_format(ticks)
    y_ticks = nice_ticks(_highest(series))
    chart = pygal.DateTimeLine(
        **_options(title, unit, y_ticks, y_format),
        x_labels=ticks,
        x_value_formatter=lambda when: when.astimezone(UTC).strftime(fmt),
        xrange=(first, last),
        dots_size=4,
        x_title="time (UTC)",
    )
    for one in series:
        chart.add(one.name, [(when, value) for when, value in zip(times, one.values, strict=True)])
    latest = "; ".join(f"{one.name}: {y_format(one.values[-1] or 0)}" for one in series)
    summary = (
        f"{len(times)} reading{'s' if len(times) != 1 else ''} from "
        f"{min(times).astimezone(UTC).strftime('%d %b %H:%M')} to "
        f"{max(times).astimezone(UTC).strftime('%d %b %H:%M')} UTC; latest {latest}."
    )
    return Chart(title=title, svg=_render(chart), empty=empty, summary=summary)


def hourly_chart(
    title: str,
    hours: Sequence[datetime],
    series: Sequence[Series],
    *,
    unit: str,
    empty: str,
    label_every: int = 6,
) -> Chart:
    """Grouped bars per hour; the empty state when every value is zero or there is no hour."""
    if not hours or _highest(series) <= 0:
        return Chart(title=title, svg=None, empty=empty)
    labels = [h.astimezone(UTC).strftime("%d %b %H:00") for h in hours]
    majors = [label for i, label in enumerate(labels) if hours[i].hour % label_every == 0]
    chart = pygal.Bar(
        **_options(title, unit, nice_ticks(_highest(series)), count_label),
        x_labels=labels,
        x_labels_major=majors,
        show_minor_x_labels=False,
        x_title="hour starting (UTC)",
    )
    for one in series:
        chart.add(one.name, list(one.values))
    totals = "; ".join(
        f"{one.name}: {count_label(sum(v or 0 for v in one.values))}" for one in series
    )
    summary = f"Totals over the hours shown: {totals}."
    return Chart(title=title, svg=_render(chart), empty=empty, summary=summary)


def time_label(when: datetime, *, with_date: bool = True) -> str:
    """A short UTC label for a point in time."""
    return when.astimezone(UTC).strftime("%d %b %H:%M" if with_date else "%H:%M")


def chart_figure(chart: Chart) -> Markup:
    """The chart as a ``<figure>``: its SVG and a summary, or its empty state, under its title."""
    slug = re.sub(r"[^a-z0-9]+", "-", chart.title.lower()).strip("-")[:40]
    if chart.svg is None:
        return Markup(
            '<figure class="chart empty" data-testid="chart-{slug}" data-empty="true">'
            "<figcaption><strong>{title}</strong></figcaption>"
            '<p class="empty-state">{empty}</p></figure>'
        ).format(slug=slug, title=chart.title, empty=chart.empty)
    return Markup(
        '<figure class="chart" data-testid="chart-{slug}" data-empty="false" role="group"'
        ' aria-label="{title}">{svg}<figcaption class="muted">{summary}</figcaption></figure>'
    ).format(slug=slug, title=chart.title, svg=chart.svg, summary=chart.summary)
