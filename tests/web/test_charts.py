"""The console's charts: axis ticks and labels, units and empty states (issue 16 item 6)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from pmsgate.i18n import use_locale
from pmsgate.web.charts import (
    Series,
    chart_figure,
    count_label,
    hourly_chart,
    nice_ticks,
    time_chart,
    time_labels,
    time_span,
    time_ticks,
    usd_label,
)

T0 = datetime(2026, 11, 24, 21, 7, 12, tzinfo=UTC)


@pytest.fixture(autouse=True)
def english_in_utc() -> Iterator[None]:
    """These tests read the charts' English words and UTC times (the Italian ones: elsewhere)."""
    with use_locale("en", "UTC"):
        yield


def _svg_texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


@pytest.mark.parametrize(
    ("high", "ticks"),
    [
        (0, [0, 1]),
        (-3, [0, 1]),
        (1, [0, 0.2, 0.4, 0.6, 0.8, 1]),
        (7, [0, 2, 4, 6, 8]),
        (37, [0, 10, 20, 30, 40]),
        (100, [0, 20, 40, 60, 80, 100]),
        (1234, [0, 250, 500, 750, 1000, 1250]),
    ],
)
def test_value_ticks_are_round_start_at_zero_and_cover_the_highest(
    high: float, ticks: list[float]
) -> None:
    assert nice_ticks(high) == pytest.approx(ticks)


@pytest.mark.parametrize("high", [0.37, 3, 9.99, 41, 5000, 123_456.7])
def test_value_ticks_are_few_and_evenly_spaced(high: float) -> None:
    ticks = nice_ticks(high)
    assert ticks[0] == 0 and ticks[-1] >= high
    assert 3 <= len(ticks) <= 7
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1


def test_snapshots_taken_within_one_minute_get_distinct_labels_around_them() -> None:
    """The old bug: two snapshots in the same minute drew both axis labels at that minute."""
    first, last = time_span([T0, T0 + timedelta(seconds=20)])
    assert last - first == timedelta(hours=1)
    assert first <= T0 and last >= T0 + timedelta(seconds=20)
    ticks = time_ticks(first, last)
    labels = time_labels(ticks)
    assert len(labels) >= 3
    assert len(set(labels)) == len(labels)
    assert all(first <= tick <= last for tick in ticks)


@pytest.mark.parametrize(
    ("span", "looks_like"),
    [
        (timedelta(hours=5), r"\d\d \w{3} \d\d:\d\d|\d\d:\d\d"),
        (timedelta(hours=30), r"\d\d \w{3} \d\d:\d\d"),
        (timedelta(days=6), r"\d\d \w{3}"),
        (timedelta(days=30), r"\d\d \w{3}"),
    ],
)
def test_time_labels_span_the_data_and_never_repeat(span: timedelta, looks_like: str) -> None:
    first, last = time_span([T0, T0 + span])
    ticks = time_ticks(first, last)
    labels = time_labels(ticks)
    assert 3 <= len(ticks) <= 7
    assert len(set(labels)) == len(labels)
    assert all(re.fullmatch(looks_like, label) for label in labels), labels
    # Evenly spaced round instants from the start of the data to its end.
    steps = {b - a for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1
    assert ticks[0] - first < steps.pop()
    assert ticks[0].second == 0 and ticks[0].microsecond == 0


def test_hours_of_two_days_show_the_day() -> None:
    ticks = [datetime(2026, 11, 24, 22, tzinfo=UTC), datetime(2026, 11, 25, 2, tzinfo=UTC)]
    assert time_labels(ticks) == ["24 Nov 22:00", "25 Nov 02:00"]


def test_units_are_written_out() -> None:
    assert count_label(1200) == "1,200"
    assert count_label(2.5) == "2.5"
    assert usd_label(12.5) == "$12.50"


def test_a_time_chart_draws_axes_with_units_and_summarises_the_data() -> None:
    times = [T0, T0 + timedelta(hours=6), T0 + timedelta(hours=12)]
    chart = time_chart(
        "Usage since onboarding",
        times,
        [Series("guest messages", [0, 12, 30]), Series("tool calls", [0, 5, 9])],
        unit="count since onboarding",
        empty="No usage yet.",
    )
    assert chart.svg is not None and "<script" not in chart.svg
    texts = _svg_texts(chart.svg)
    assert "count since onboarding" in " ".join(texts) and "time (UTC)" in texts
    assert {"0", "10", "20", "30"} <= set(texts)  # y ticks
    x_labels = [t for t in texts if re.fullmatch(r"\d\d \w{3} \d\d:\d\d", t)]
    assert len(x_labels) >= 3 and len(set(x_labels)) == len(x_labels)
    assert chart.summary.startswith("3 readings from 24 Nov 21:07 to 25 Nov 09:07;")
    assert "latest guest messages: 30; tool calls: 9." in chart.summary


def test_money_is_drawn_on_its_own_axis_in_dollars() -> None:
    chart = time_chart(
        "Spend since onboarding",
        [T0, T0 + timedelta(hours=6)],
        [Series("spend (US dollars)", [0, 2.5])],
        unit="US dollars",
        empty="No usage yet.",
        y_format=usd_label,
    )
    assert chart.svg is not None
    texts = _svg_texts(chart.svg)
    assert "US dollars" in texts and "$0.00" in texts and "$2.50" in texts


def test_a_chart_without_data_is_its_empty_state() -> None:
    chart = time_chart("Usage", [], [Series("messages", [])], unit="count", empty="No usage yet.")
    assert chart.svg is None and not chart.drawn
    figure = chart_figure(chart)
    assert 'data-empty="true"' in figure and "No usage yet." in figure and "<svg" not in figure
    hours = [T0.replace(minute=0, second=0) - timedelta(hours=47 - i) for i in range(48)]
    idle = hourly_chart("Hourly", hours, [Series("calls", [0] * 48)], unit="calls", empty="Idle.")
    assert idle.svg is None and idle.empty == "Idle."


def test_hourly_bars_are_labelled_by_day_and_hour_every_six_hours() -> None:
    hours = [T0.replace(minute=0, second=0) - timedelta(hours=47 - i) for i in range(48)]
    chart = hourly_chart(
        "Lookups vs requests",
        hours,
        [Series("lookups", [i % 4 for i in range(48)]), Series("requests", [1] * 48)],
        unit="calls per hour",
        empty="Idle.",
    )
    assert chart.svg is not None
    shown = [t for t in _svg_texts(chart.svg) if re.fullmatch(r"\d\d \w{3} \d\d:00", t)]
    assert len(shown) == 8 and len(set(shown)) == 8
    assert all(label[-5:] in ("00:00", "06:00", "12:00", "18:00") for label in shown)
    assert "calls per hour" in _svg_texts(chart.svg)
    assert chart.summary == "Totals over the hours shown: lookups: 72; requests: 48."
    assert 'role="group"' in chart_figure(chart)
