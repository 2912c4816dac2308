"""Date filters enforced on our side (docs/requirements.md R8: the server may ignore them).

``reservations/get-list`` returns every reservation whatever the date filters
say, so nothing it returns is passed on before its dates are checked here. The
functions take either typed models (:class:`~pmsgate.integrations.kross.models.Reservation`)
or the raw dictionaries of a :class:`~pmsgate.integrations.kross.client.KrossResult`, and
report how many rows the server sent that were outside the asked range.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class FilteredRows(Generic[T]):
    """Rows kept after enforcing a date filter, with counts of what was dropped."""

    items: list[T]
    # How many rows the server returned before filtering.
    returned: int
    dropped_out_of_range: int
    # Rows whose dates could not be read are dropped too, never passed on unchecked.
    dropped_unreadable: int = 0
    filters: dict[str, str] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        """How many rows passed the filter."""
        return len(self.items)

    @property
    def server_ignored_filter(self) -> bool:
        """True when the server sent rows outside the asked range."""
        return self.dropped_out_of_range > 0


FilteredReservations = FilteredRows
"""The result of filtering reservation rows (an alias kept for readability)."""


class _Unreadable(Exception):
    pass


def _value(row: Any, name: str) -> Any:
    if isinstance(row, Mapping):
        return row.get(name)
    return getattr(row, name, None)


def _as_date(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip()[:10])
        except ValueError:
            raise _Unreadable from None
    raise _Unreadable


def _as_datetime(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time())
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.strip()).replace(tzinfo=None)
        except ValueError:
            raise _Unreadable from None
    raise _Unreadable


def _filter(
    rows: Iterable[T], keep: Callable[[T], bool], filters: dict[str, str]
) -> FilteredRows[T]:
    items: list[T] = []
    returned = out_of_range = unreadable = 0
    for row in rows:
        returned += 1
        try:
            if keep(row):
                items.append(row)
            else:
                out_of_range += 1
        except _Unreadable:
            unreadable += 1
    return FilteredRows(items, returned, out_of_range, unreadable, filters)


def stay_overlaps(
    arrival: dt.date, departure: dt.date, date_from: dt.date, date_to: dt.date
) -> bool:
    """True when a stay has a night in [date_from, date_to] (both inclusive)."""
    if departure <= arrival:
        # A stay without nights is on its arrival day only.
        return date_from <= arrival <= date_to
    return arrival <= date_to and departure > date_from


def filter_by_stay(
    reservations: Iterable[T], date_from: dt.date, date_to: dt.date
) -> FilteredRows[T]:
    """Reservations whose nights [arrival, departure) overlap [date_from, date_to]."""
    if date_to < date_from:
        raise ValueError("date_to must not be before date_from")

    def keep(row: T) -> bool:
        arrival = _as_date(_value(row, "arrival"))
        departure = _as_date(_value(row, "departure"))
        return stay_overlaps(arrival, departure, date_from, date_to)

    return _filter(
        reservations, keep, {"stay_from": date_from.isoformat(), "stay_to": date_to.isoformat()}
    )


def filter_in_house(reservations: Iterable[T], on: dt.date) -> FilteredRows[T]:
    """Reservations whose guests sleep there the night of ``on``."""
    return filter_by_stay(reservations, on, on)


def filter_by_date_field(
    rows: Iterable[T],
    field_name: str,
    date_from: dt.date | None = None,
    date_to: dt.date | None = None,
) -> FilteredRows[T]:
    """Rows whose ``field_name`` date lies in [date_from, date_to]; an open end is unbounded."""

    def keep(row: T) -> bool:
        value = _as_date(_value(row, field_name))
        return (date_from is None or value >= date_from) and (date_to is None or value <= date_to)

    filters = {}
    if date_from is not None:
        filters[f"{field_name}_from"] = date_from.isoformat()
    if date_to is not None:
        filters[f"{field_name}_to"] = date_to.isoformat()
    return _filter(rows, keep, filters)


def filter_availability(rows: Iterable[T], date_from: dt.date, date_to: dt.date) -> FilteredRows[T]:
    """Availability rows (one per room type and night) for nights in [date_from, date_to]."""
    return filter_by_date_field(rows, "date", date_from, date_to)


def enforce_reservation_filters(rows: Iterable[T], filters: Mapping[str, Any]) -> FilteredRows[T]:
    """Apply on our side every date filter of a ``reservations/get-list`` request body."""
    checks: list[Callable[[T], bool]] = []
    applied: dict[str, str] = {}

    for key in ("arrival", "departure"):
        lower, upper = filters.get(f"{key}_from"), filters.get(f"{key}_to")
        if lower is None and upper is None:
            continue
        low = _request_date(lower)
        high = _request_date(upper)
        checks.append(_between(key, low, high))
        applied.update(_describe(key, low, high))

    low_dt = _request_datetime(filters.get("date_reservation_from"))
    high_dt = _request_datetime(filters.get("date_reservation_to"))
    if low_dt is not None or high_dt is not None:

        def booked_in_range(row: T) -> bool:
            # The upstream filter has minute granularity; compare at the same resolution.
            booked = _as_datetime(_value(row, "date_reservation")).replace(second=0, microsecond=0)
            return (low_dt is None or booked >= low_dt) and (high_dt is None or booked <= high_dt)

        checks.append(booked_in_range)
        if low_dt is not None:
            applied["date_reservation_from"] = low_dt.isoformat(sep=" ", timespec="minutes")
        if high_dt is not None:
            applied["date_reservation_to"] = high_dt.isoformat(sep=" ", timespec="minutes")

    on = _request_date(filters.get("date"))
    if filters.get("in_house") and on is not None:

        def in_house(row: T) -> bool:
            arrival = _as_date(_value(row, "arrival"))
            departure = _as_date(_value(row, "departure"))
            return stay_overlaps(arrival, departure, on, on)

        checks.append(in_house)
        applied["in_house_on"] = on.isoformat()

    return _filter(rows, lambda row: all(check(row) for check in checks), applied)


def _between(key: str, low: dt.date | None, high: dt.date | None) -> Callable[[Any], bool]:
    def check(row: Any) -> bool:
        value = _as_date(_value(row, key))
        return (low is None or value >= low) and (high is None or value <= high)

    return check


def _describe(key: str, low: dt.date | None, high: dt.date | None) -> dict[str, str]:
    described = {}
    if low is not None:
        described[f"{key}_from"] = low.isoformat()
    if high is not None:
        described[f"{key}_to"] = high.isoformat()
    return described


def _request_date(value: Any) -> dt.date | None:
    if value is None:
        return None
    try:
        return _as_date(value)
    except _Unreadable:
        raise ValueError(f"not a date: {value!r}") from None


def _request_datetime(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    try:
        return _as_datetime(value)
    except _Unreadable:
        raise ValueError(f"not a date and time: {value!r}") from None
