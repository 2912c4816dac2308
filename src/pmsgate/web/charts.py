"""The console's charts, drawn on the server as SVG with pygal (no JavaScript, no CDN).

Each chart says what it measures, in which unit, over which period:

- the time axis is computed here (:func:`time_ticks`, :func:`time_format`): a handful of
  round instants of the reader's time zone spanning the data, labelled in the reader's
  language so that no two labels read the same (minutes for a span of hours, days for a
  span of weeks); a single point, or points taken within the same minute, get a window
  around them instead of a zero-width axis;
- the value axis starts at zero and has round ticks (:func:`nice_ticks`) with the unit in
  its title; money has its own chart and axis (never scaled into a count);
- a chart with nothing to draw is not drawn: :class:`Chart` carries the sentence the page
  shows instead (its empty state).

Every word a chart carries (axis titles, the summary) is translated through
:mod:`pmsgate.i18n` when the chart is drawn, and every time is the reader's local time.

pygal writes an inline ``<script>`` with its tooltip configuration even when no script
file is loaded (``js=[]``); the console never loads pygal's tooltip script, so that
configuration is dropped and the page's Content-Security-Policy can forbid inline scripts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pygal
from babel import dates, numbers
from markupsafe import Markup
from pygal.style import Style

from pmsgate.i18n import gettext, local, locale, ngettext, reader, timezone_label

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
    key: str = ""  # the figure's test id, the same in every language (else from the title)

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
    """Round instants within [first, last], at most ``count`` + 1 of them, evenly spaced.

    Round on the reader's clock (a day step falls on local midnights), so the ticks are in
    the reader's time zone.
    """
    span = last - first
    step = next((s for s in _TIME_STEPS if span / s <= count), None)
    if step is None:
        step = timedelta(days=math.ceil(span / timedelta(days=1) / count))
    zone = reader().zone
    # A Monday: week steps start on Mondays. Arithmetic between datetimes of one zone is on
    # the wall clock, so the steps stay round across a daylight-saving change.
    epoch = datetime(2000, 1, 3, tzinfo=zone)
    start = first.astimezone(zone)
    offset = (start - epoch) % step
    tick = start if offset == timedelta(0) else start - offset + step
    ticks = []
    while tick <= last:
        ticks.append(tick)
        tick += step
    return ticks


# CLDR patterns of a time axis' labels, shortest first (``20:40``, ``24 nov``, …).
_TIME_PATTERNS = ("HH:mm", "dd MMM", "dd MMM HH:mm", "dd MMM y HH:mm")


def _pattern_label(when: datetime, pattern: str) -> str:
    return dates.format_datetime(local(when), pattern, locale=locale())


def time_format(ticks: Sequence[datetime]) -> str:
    """The shortest CLDR pattern under which the ticks' labels (local times) all differ."""
    days = {local(t).date() for t in ticks}
    for pattern in _TIME_PATTERNS:
        labels = [_pattern_label(t, pattern) for t in ticks]
        if len(set(labels)) == len(labels) and (pattern != "dd MMM" or _whole_days(ticks)):
            if pattern == "HH:mm" and len(days) > 1:
                continue  # hours of two days: the day must show
            return pattern
    return _TIME_PATTERNS[-1]


def _whole_days(ticks: Sequence[datetime]) -> bool:
    return all(local(t).time() == datetime.min.time() for t in ticks)


def time_labels(ticks: Sequence[datetime]) -> list[str]:
    """The ticks' labels (the reader's local time and language), all distinct."""
    pattern = time_format(ticks)
    return [_pattern_label(t, pattern) for t in ticks]


def count_label(value: float) -> str:
    """A count on an axis in the reader's locale: 1,200 / 1.200 (never 1200.0)."""
    pattern = "#,##0" if float(value).is_integer() else "#,##0.0"
    return numbers.format_decimal(value, format=pattern, locale=locale())


def usd_label(value: float) -> str:
    """An amount of US dollars on an axis: $12.50 / 12,50 $."""
    amount = numbers.format_decimal(value, format="#,##0.00", locale=locale())
    return gettext("${amount}").format(amount=amount)


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
    key: str = "",
) -> Chart:
    """Lines over real time (one per series); the empty state when there is no point."""
    if not times:
        return Chart(title=title, svg=None, empty=empty, key=key)
    first, last = time_span(times)
    ticks = time_ticks(first, last)
    fmt = time_format(ticks)
    y_ticks = nice_ticks(_highest(series))
    chart = pygal.DateTimeLine(
        **_options(title, unit, y_ticks, y_format),
        x_labels=ticks,
        x_value_formatter=lambda when: _pattern_label(when, fmt),
        xrange=(first, last),
        dots_size=4,
        x_title=gettext("time ({zone})").format(zone=timezone_label()),
    )
    for one in series:
        chart.add(one.name, [(when, value) for when, value in zip(times, one.values, strict=True)])
    latest = "; ".join(f"{one.name}: {y_format(one.values[-1] or 0)}" for one in series)
    summary = ngettext(
        "{count} reading from {first} to {last}; latest {latest}.",
        "{count} readings from {first} to {last}; latest {latest}.",
        len(times),
    ).format(
        count=len(times),
        # A point in time in the reader's zone and language (24 nov 20:40).
        first=_pattern_label(min(times), "dd MMM HH:mm"),
        last=_pattern_label(max(times), "dd MMM HH:mm"),
        latest=latest,
    )
    return Chart(title=title, svg=_render(chart), empty=empty, summary=summary, key=key)


def hourly_chart(
    title: str,
    hours: Sequence[datetime],
    series: Sequence[Series],
    *,
    unit: str,
    empty: str,
    label_every: int = 6,
    key: str = "",
) -> Chart:
    """Grouped bars per hour; the empty state when every value is zero or there is no hour."""
    if not hours or _highest(series) <= 0:
        return Chart(title=title, svg=None, empty=empty, key=key)
    labels = [_pattern_label(h, "dd MMM HH:mm") for h in hours]
    majors = [label for i, label in enumerate(labels) if local(hours[i]).hour % label_every == 0]
    chart = pygal.Bar(
        **_options(title, unit, nice_ticks(_highest(series)), count_label),
        x_labels=labels,
        x_labels_major=majors,
        show_minor_x_labels=False,
        x_title=gettext("hour starting ({zone})").format(zone=timezone_label()),
    )
    for one in series:
        chart.add(one.name, list(one.values))
    totals = "; ".join(
        f"{one.name}: {count_label(sum(v or 0 for v in one.values))}" for one in series
    )
    summary = gettext("Totals over the hours shown: {totals}.").format(totals=totals)
    return Chart(title=title, svg=_render(chart), empty=empty, summary=summary, key=key)


def chart_figure(chart: Chart) -> Markup:
    """The chart as a ``<figure>``: its SVG and a summary, or its empty state, under its title."""
    slug = chart.key or re.sub(r"[^a-z0-9]+", "-", chart.title.lower()).strip("-")[:40]
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
