"""Database properties of the notes emulator: the schema, page values, query filters and sorts.

The shapes follow the public Notion API reference ("Property values", "Filter data source
entries", "Sort data source entries"); the emulator knows the property types pmsgate's
apartments database uses — ``title``, ``rich_text``, ``number``, ``select``, ``checkbox`` and
``date`` — and the ``created_time`` / ``last_edited_time`` timestamps.

A page's value of each property is kept in the shape the API answers with (rich text items,
a number, a select option object, a bool, a date object), so rendering is a lookup and a
filter compares like with like. A request that the real API would refuse is refused with a
400 ``validation_error`` naming the field, never silently ignored.

Matching, where the reference leaves it open: text ``equals`` is exact, ``contains``,
``starts_with`` and ``ends_with`` ignore case; a date condition without a time compares
calendar days (UTC), one with a time compares instants; empty values sort last in either
direction; a ``select`` sorts in the order of its options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol, TypeVar

from pmsgate.sandbox.notion.errors import validation

MAX_TEXT_CHARS = 2000
MAX_RICH_TEXT_ITEMS = 100
MAX_SELECT_NAME = 100
# "Compound filters can be nested up to two levels deep" (filter reference).
MAX_FILTER_NESTING = 2
MAX_SORTS = 100
ANNOTATIONS = {
    "bold": False,
    "italic": False,
    "strikethrough": False,
    "underline": False,
    "code": False,
    "color": "default",
}
TIMESTAMPS = ("created_time", "last_edited_time")
# The filter keys each property type answers to (a title also answers rich_text filters).
_FILTER_KEYS: dict[str, frozenset[str]] = {
    "title": frozenset({"title", "rich_text"}),
    "rich_text": frozenset({"rich_text"}),
    "number": frozenset({"number"}),
    "select": frozenset({"select"}),
    "checkbox": frozenset({"checkbox"}),
    "date": frozenset({"date"}),
}
_ALL_FILTER_KEYS = frozenset().union(*_FILTER_KEYS.values())
_EMPTINESS = ("is_empty", "is_not_empty")
_RELATIVE_DATES = (
    "past_week",
    "past_month",
    "past_year",
    "this_week",
    "next_week",
    "next_month",
    "next_year",
)


# --- the schema -----------------------------------------------------------------------------


@dataclass
class PropertySpec:
    """One property of a data source: its name, short id, type and (for select) options."""

    name: str
    id: str
    type: str
    options: list[dict[str, str]] = field(default_factory=list)

    def schema_json(self) -> dict[str, Any]:
        """The property object of a database (before 2025-09-03) or data source."""
        config: dict[str, Any] = {}
        if self.type == "number":
            config = {"format": "number"}
        elif self.type == "select":
            config = {"options": [dict(option) for option in self.options]}
        return {"id": self.id, "name": self.name, "type": self.type, self.type: config}

    def option(self, name: str) -> dict[str, str] | None:
        """The select option of that name, if the schema has it."""
        return next((o for o in self.options if o["name"] == name), None)

    def empty(self) -> Any:
        """The value of this property on a page that never set it."""
        if self.type in ("title", "rich_text"):
            return []
        if self.type == "checkbox":
            return False
        return None


class Schema:
    """The ordered properties of one data source, found by name or by id."""

    def __init__(self, properties: Sequence[PropertySpec]) -> None:
        self.properties = {spec.name: spec for spec in properties}

    def find(self, key: Any) -> PropertySpec | None:
        """The property named ``key``, or whose id is ``key``."""
        if not isinstance(key, str):
            return None
        return self.properties.get(key) or next(
            (p for p in self.properties.values() if p.id == key), None
        )

    def title(self) -> PropertySpec:
        """The one title property."""
        return next(p for p in self.properties.values() if p.type == "title")

    def json(self) -> dict[str, Any]:
        """The ``properties`` object of a database or data source."""
        return {name: spec.schema_json() for name, spec in self.properties.items()}

    def render(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A page's ``properties`` object."""
        return {
            name: {"id": spec.id, "type": spec.type, spec.type: values.get(name, spec.empty())}
            for name, spec in self.properties.items()
        }


# --- values ---------------------------------------------------------------------------------


def short(value: Any) -> str:
    """``repr`` of a value, shortened for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def plain_text(items: Any) -> str:
    """The text of a rich-text array."""
    if not isinstance(items, list):
        return ""
    return "".join(str(item.get("plain_text", "")) for item in items if isinstance(item, dict))


def rich_text_items(text: str) -> list[dict[str, Any]]:
    """One plain text item, as the API answers it."""
    return [
        {
            "type": "text",
            "text": {"content": text, "link": None},
            "annotations": dict(ANNOTATIONS),
            "plain_text": text,
            "href": None,
        }
    ]


def parse_rich_text(items: Any, where: str) -> list[dict[str, Any]]:
    """A request's rich-text array, validated and completed as the API answers it."""
    if not isinstance(items, list):
        raise validation(f"{where} should be an array, instead was `{short(items)}`.")
    if len(items) > MAX_RICH_TEXT_ITEMS:
        raise validation(
            f"{where}.length should be ≤ `{MAX_RICH_TEXT_ITEMS}`, instead was `{len(items)}`."
        )
    result = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise validation(f"{at} should be an object, instead was `{short(item)}`.")
        if item.get("type", "text") != "text" or not isinstance(item.get("text"), dict):
            raise validation(f"{at}.text should be defined (the emulator supports text only).")
        text = item["text"]
        content = text.get("content")
        if not isinstance(content, str):
            raise validation(f"{at}.text.content should be a string, instead was `{content}`.")
        if len(content) > MAX_TEXT_CHARS:
            raise validation(
                f"{at}.text.content.length should be ≤ `{MAX_TEXT_CHARS}`, "
                f"instead was `{len(content)}`."
            )
        link = text.get("link")
        if link is not None and not (isinstance(link, dict) and isinstance(link.get("url"), str)):
            raise validation(f"{at}.text.link should be an object with a url, or null.")
        annotations = dict(ANNOTATIONS)
        given = item.get("annotations") or {}
        if not isinstance(given, dict) or set(given) - set(ANNOTATIONS):
            raise validation(f"{at}.annotations should only contain {sorted(ANNOTATIONS)}.")
        annotations.update(given)
        result.append(
            {
                "type": "text",
                "text": {"content": content, "link": link},
                "annotations": annotations,
                "plain_text": content,
                "href": link["url"] if link else None,
            }
        )
    return result


def parse_values(schema: Schema, raw: Any, where: str = "body.properties") -> dict[str, Any]:
    """A request's ``properties`` object as stored values, by property name.

    A select naming an option the schema lacks adds the option, as the API does for an
    integration that may edit the data source.
    """
    if not isinstance(raw, dict):
        raise validation(f"{where} should be an object, instead was `{short(raw)}`.")
    values: dict[str, Any] = {}
    for key, given in raw.items():
        spec = schema.find(key)
        if spec is None:
            raise validation(f"{key} is not a property that exists.")
        values[spec.name] = _parse_value(spec, given, f"{where}.{key}")
    return values


def _parse_value(spec: PropertySpec, given: Any, where: str) -> Any:
    if not isinstance(given, dict):
        raise validation(f"{where} should be an object, instead was `{short(given)}`.")
    stated = given.get("type", spec.type)
    extra = set(given) - {"type", "id", spec.type}
    if stated != spec.type or extra:
        other = stated if stated != spec.type else sorted(extra)[0]
        raise validation(
            f"{where}.{other} should be not present: {spec.name} is a {spec.type} property."
        )
    if spec.type not in given:
        raise validation(f"{where}.{spec.type} should be defined, instead was `undefined`.")
    value = given[spec.type]
    at = f"{where}.{spec.type}"
    if spec.type in ("title", "rich_text"):
        return parse_rich_text(value, at)
    if spec.type == "number":
        if value is not None and not _is_number(value):
            raise validation(f"{at} should be a number or `null`, instead was `{short(value)}`.")
        return value
    if spec.type == "checkbox":
        if not isinstance(value, bool):
            raise validation(f"{at} should be a boolean, instead was `{short(value)}`.")
        return value
    if spec.type == "select":
        return None if value is None else _select_option(spec, value, at)
    return None if value is None else _date_value(value, at)


def _select_option(spec: PropertySpec, value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise validation(f"{where} should be an object or `null`, instead was `{short(value)}`.")
    if "id" in value:
        found = next((o for o in spec.options if o["id"] == value["id"]), None)
        if found is None:
            raise validation(f"{where}.id: no option with id `{short(value['id'])}`.")
        return dict(found)
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        raise validation(f"{where}.name should be a non-empty string, instead was `{name}`.")
    if len(name) > MAX_SELECT_NAME or "," in name:
        raise validation(
            f"{where}.name should be at most {MAX_SELECT_NAME} characters without commas."
        )
    found = spec.option(name)
    if found is None:
        found = {"id": f"opt{len(spec.options) + 1}", "name": name, "color": "default"}
        spec.options.append(found)
    return dict(found)


def _date_value(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise validation(f"{where} should be an object or `null`, instead was `{short(value)}`.")
    extra = set(value) - {"start", "end", "time_zone"}
    if extra:
        raise validation(f"{where}.{sorted(extra)[0]} should be not present.")
    start = value.get("start")
    parse_moment(start, f"{where}.start")
    end = value.get("end")
    if end is not None:
        parse_moment(end, f"{where}.end")
    time_zone = value.get("time_zone")
    if time_zone is not None and not isinstance(time_zone, str):
        raise validation(f"{where}.time_zone should be a string or `null`.")
    return {"start": start, "end": end, "time_zone": time_zone}


def parse_moment(value: Any, where: str) -> tuple[datetime, bool]:
    """An ISO 8601 date or date-time as an aware UTC instant, and whether it had a time."""
    if not isinstance(value, str):
        raise validation(f"{where} should be an ISO 8601 date string, instead was `{value}`.")
    text = value.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC), False
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise validation(
            f"{where} should be an ISO 8601 date string, instead was `{short(value)}`."
        ) from None
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment, True


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# --- filters --------------------------------------------------------------------------------


class Row(Protocol):
    """What a filter or a sort looks at: a page's values and its two timestamps."""

    values: dict[str, Any]
    created_time: datetime
    last_edited_time: datetime


Predicate = Callable[[Row], bool]
R = TypeVar("R", bound=Row)


def compile_filter(
    raw: Any, schema: Schema, now: datetime, where: str = "body.filter"
) -> Predicate:
    """The predicate of a query's ``filter`` (a property, timestamp or compound filter)."""
    return _compile(raw, schema, now, where, level=0)


def _compile(raw: Any, schema: Schema, now: datetime, where: str, *, level: int) -> Predicate:
    if not isinstance(raw, dict):
        raise validation(f"{where} should be an object, instead was `{short(raw)}`.")
    compound = [key for key in ("and", "or") if key in raw]
    if compound:
        return _compound(raw, compound[0], schema, now, where, level=level)
    if "timestamp" in raw:
        return _timestamp_filter(raw, now, where)
    if "property" in raw:
        return _property_filter(raw, schema, now, where)
    raise validation(
        f"{where} should be a property filter, a timestamp filter or an `and` / `or` "
        f"compound, instead was `{short(raw)}`."
    )


def _compound(
    raw: dict[str, Any], key: str, schema: Schema, now: datetime, where: str, *, level: int
) -> Predicate:
    if len(raw) != 1:
        other = sorted(set(raw) - {key})[0]
        raise validation(f"{where}.{other} should be not present next to `{key}`.")
    if level >= MAX_FILTER_NESTING:
        raise validation(
            f"{where}.{key}: compound filters can be nested at most {MAX_FILTER_NESTING} "
            "levels deep."
        )
    items = raw[key]
    if not isinstance(items, list):
        raise validation(f"{where}.{key} should be an array, instead was `{short(items)}`.")
    parts = [
        _compile(item, schema, now, f"{where}.{key}[{index}]", level=level + 1)
        for index, item in enumerate(items)
    ]
    if key == "and":
        return lambda row: all(part(row) for part in parts)
    return lambda row: any(part(row) for part in parts)


def _timestamp_filter(raw: dict[str, Any], now: datetime, where: str) -> Predicate:
    stamp = raw["timestamp"]
    if stamp not in TIMESTAMPS:
        raise validation(
            f"{where}.timestamp should be `created_time` or `last_edited_time`, instead was "
            f"`{short(stamp)}`."
        )
    extra = set(raw) - {"timestamp", stamp, "type"}
    if extra:
        raise validation(f"{where}.{sorted(extra)[0]} should be not present.")
    if stamp not in raw:
        raise validation(f"{where}.{stamp} should be defined, instead was `undefined`.")
    test = _date_condition(raw[stamp], now, f"{where}.{stamp}", emptiness=False)

    def matches(row: Row) -> bool:
        moment: datetime = getattr(row, stamp)
        return test(moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC))

    return matches


def _property_filter(raw: dict[str, Any], schema: Schema, now: datetime, where: str) -> Predicate:
    spec = schema.find(raw["property"])
    if spec is None:
        raise validation(f"Could not find property with name or id: {raw['property']}")
    keys = [key for key in raw if key in _ALL_FILTER_KEYS]
    extra = set(raw) - {"property", "type", *keys}
    if extra:
        raise validation(f"{where}.{sorted(extra)[0]} should be not present.")
    if len(keys) != 1:
        raise validation(
            f"{where} should name exactly one condition type for {spec.name} "
            f"({', '.join(sorted(_FILTER_KEYS[spec.type]))}), instead had {len(keys)}."
        )
    key = keys[0]
    if key not in _FILTER_KEYS[spec.type]:
        raise validation(
            f"{where}.{key}: {spec.name} is a {spec.type} property and takes a "
            f"{' or '.join(sorted(_FILTER_KEYS[spec.type]))} filter."
        )
    at = f"{where}.{key}"
    condition = raw[key]
    name = spec.name
    if spec.type in ("title", "rich_text"):
        test_text = _text_condition(condition, at)
        return lambda row: test_text(plain_text(row.values.get(name)))
    if spec.type == "number":
        test_number = _number_condition(condition, at)
        return lambda row: test_number(row.values.get(name))
    if spec.type == "checkbox":
        test_box = _checkbox_condition(condition, at)
        return lambda row: test_box(bool(row.values.get(name)))
    if spec.type == "select":
        test_select = _select_condition(condition, at)
        return lambda row: test_select(_option_name(row.values.get(name)))
    test_date = _date_condition(condition, now, at, emptiness=True)
    return lambda row: test_date(_date_start(row.values.get(name)))


def _operator(condition: Any, allowed: Sequence[str], where: str) -> tuple[str, Any]:
    """The one ``operator: value`` pair of a condition object."""
    if not isinstance(condition, dict):
        raise validation(f"{where} should be an object, instead was `{short(condition)}`.")
    if len(condition) != 1 or next(iter(condition)) not in allowed:
        raise validation(
            f"{where} should have exactly one of {', '.join(allowed)}, instead was "
            f"`{short(condition)}`."
        )
    operator, value = next(iter(condition.items()))
    if operator in _EMPTINESS and value is not True:
        raise validation(f"{where}.{operator} should be `true`, instead was `{short(value)}`.")
    return operator, value


# What each operator of a text and of a number condition tests (a number may be missing).
_TEXT_TESTS: dict[str, Callable[[str, str], bool]] = {
    "equals": lambda text, value: text == value,
    "does_not_equal": lambda text, value: text != value,
    "contains": lambda text, value: value.casefold() in text.casefold(),
    "does_not_contain": lambda text, value: value.casefold() not in text.casefold(),
    "starts_with": lambda text, value: text.casefold().startswith(value.casefold()),
    "ends_with": lambda text, value: text.casefold().endswith(value.casefold()),
}
_NUMBER_TESTS: dict[str, Callable[[Any, Any], bool]] = {
    "equals": lambda n, value: n is not None and n == value,
    "does_not_equal": lambda n, value: n is None or n != value,
    "greater_than": lambda n, value: n is not None and n > value,
    "less_than": lambda n, value: n is not None and n < value,
    "greater_than_or_equal_to": lambda n, value: n is not None and n >= value,
    "less_than_or_equal_to": lambda n, value: n is not None and n <= value,
}


def _text_condition(condition: Any, where: str) -> Callable[[str], bool]:
    return _compared(condition, where, _TEXT_TESTS, "", "a string", lambda v: isinstance(v, str))


def _number_condition(condition: Any, where: str) -> Callable[[Any], bool]:
    return _compared(condition, where, _NUMBER_TESTS, None, "a number", _is_number)


def _compared(
    condition: Any,
    where: str,
    tests: Mapping[str, Callable[[Any, Any], bool]],
    blank: Any,
    kind: str,
    fits: Callable[[Any], bool],
) -> Callable[[Any], bool]:
    """The test of a condition of ``tests`` or emptiness (a ``blank`` value is empty)."""
    operator, value = _operator(condition, (*tests, *_EMPTINESS), where)
    if operator in _EMPTINESS:
        empty = operator == "is_empty"
        return lambda given: (given == blank) is empty
    if not fits(value):
        raise validation(f"{where}.{operator} should be {kind}, instead was `{short(value)}`.")
    test = tests[operator]
    return lambda given: test(given, value)


def _checkbox_condition(condition: Any, where: str) -> Callable[[bool], bool]:
    operator, value = _operator(condition, ("equals", "does_not_equal"), where)
    if not isinstance(value, bool):
        raise validation(f"{where}.{operator} should be a boolean, instead was `{short(value)}`.")
    if operator == "equals":
        return lambda checked: checked is value
    return lambda checked: checked is not value


def _select_condition(condition: Any, where: str) -> Callable[[str | None], bool]:
    operator, value = _operator(condition, ("equals", "does_not_equal", *_EMPTINESS), where)
    if operator in _EMPTINESS:
        empty = operator == "is_empty"
        return lambda name: (name is None) is empty
    if not isinstance(value, str):
        raise validation(f"{where}.{operator} should be a string, instead was `{short(value)}`.")
    if operator == "equals":
        return lambda name: name == value
    return lambda name: name != value


def _date_condition(
    condition: Any, now: datetime, where: str, *, emptiness: bool
) -> Callable[[datetime | None], bool]:
    ops = ("equals", "before", "after", "on_or_before", "on_or_after", *_RELATIVE_DATES)
    operator, value = _operator(condition, (*ops, *_EMPTINESS) if emptiness else ops, where)
    if operator in _EMPTINESS:
        empty = operator == "is_empty"
        return lambda moment: (moment is None) is empty
    if operator in _RELATIVE_DATES:
        if value != {}:
            raise validation(f"{where}.{operator} should be `{{}}`, instead was `{short(value)}`.")
        low, high = _relative_range(operator, now)
        return lambda moment: moment is not None and low <= moment <= high
    bound, with_time = parse_moment(value, f"{where}.{operator}")
    # A day compares calendar days; a date-time compares instants.
    key: Callable[[datetime], Any] = (lambda m: m) if with_time else (lambda m: m.date())
    edge = key(bound)
    tests: dict[str, Callable[[Any], bool]] = {
        "equals": lambda m: m == edge,
        "before": lambda m: m < edge,
        "after": lambda m: m > edge,
        "on_or_before": lambda m: m <= edge,
        "on_or_after": lambda m: m >= edge,
    }
    test = tests[operator]
    return lambda moment: moment is not None and test(key(moment))


def _relative_range(operator: str, now: datetime) -> tuple[datetime, datetime]:
    now = now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)
    if operator == "this_week":
        # Weeks start on Monday (UTC) here; the real API uses the workspace's setting.
        start = datetime(now.year, now.month, now.day, tzinfo=UTC) - timedelta(days=now.weekday())
        return start, start + timedelta(days=7) - timedelta(microseconds=1)
    span = {"week": 7, "month": 30, "year": 365}[operator.split("_")[1]]
    if operator.startswith("past"):
        return now - timedelta(days=span), now
    return now, now + timedelta(days=span)


def _option_name(value: Any) -> str | None:
    return str(value["name"]) if isinstance(value, dict) and "name" in value else None


def _date_start(value: Any) -> datetime | None:
    if not isinstance(value, dict) or not isinstance(value.get("start"), str):
        return None
    return parse_moment(value["start"], "date.start")[0]


# --- sorts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SortKey:
    """One criterion of a query's ``sorts``: what to compare, and in which direction."""

    key: Callable[[Row], Any]
    descending: bool


def compile_sorts(raw: Any, schema: Schema, where: str = "body.sorts") -> list[SortKey]:
    """A query's ``sorts`` (property or timestamp criteria, the first the most important)."""
    if not isinstance(raw, list):
        raise validation(f"{where} should be an array, instead was `{short(raw)}`.")
    if len(raw) > MAX_SORTS:
        raise validation(f"{where}.length should be ≤ `{MAX_SORTS}`, instead was `{len(raw)}`.")
    return [_sort_key(item, schema, f"{where}[{index}]") for index, item in enumerate(raw)]


def _sort_key(raw: Any, schema: Schema, where: str) -> SortKey:
    if not isinstance(raw, dict):
        raise validation(f"{where} should be an object, instead was `{short(raw)}`.")
    direction = raw.get("direction")
    if direction not in ("ascending", "descending"):
        raise validation(
            f"{where}.direction should be `ascending` or `descending`, instead was "
            f"`{short(direction)}`."
        )
    criteria = [key for key in ("property", "timestamp") if key in raw]
    extra = set(raw) - {"direction", *criteria}
    if len(criteria) != 1 or extra:
        raise validation(f"{where} should have exactly one of property, timestamp.")
    descending = direction == "descending"
    if criteria[0] == "timestamp":
        stamp = raw["timestamp"]
        if stamp not in TIMESTAMPS:
            raise validation(
                f"{where}.timestamp should be `created_time` or `last_edited_time`, instead "
                f"was `{short(stamp)}`."
            )
        return SortKey(lambda row: getattr(row, stamp), descending)
    spec = schema.find(raw["property"])
    if spec is None:
        raise validation(f"Could not find sort property with name or id: {raw['property']}")
    return SortKey(_value_key(spec), descending)


def _value_key(spec: PropertySpec) -> Callable[[Row], Any]:
    """The comparable form of a property's value; None when the value is empty."""
    name = spec.name

    def key(row: Row) -> Any:
        value = row.values.get(name)
        if spec.type in ("title", "rich_text"):
            text = plain_text(value)
            return text.casefold() if text else None
        if spec.type == "select":
            option = _option_name(value)
            names = [o["name"] for o in spec.options]
            return names.index(option) if option in names else None
        if spec.type == "date":
            return _date_start(value)
        if spec.type == "checkbox":
            return bool(value)
        return value

    return key


def sort_rows(rows: Sequence[R], sorts: Sequence[SortKey]) -> list[R]:
    """``rows`` in the order of ``sorts``; ties keep their order, empty values go last."""
    ordered = list(rows)
    # Stable sorts from the least important criterion to the most important one.
    for sort in reversed(sorts):
        present = [row for row in ordered if sort.key(row) is not None]
        missing = [row for row in ordered if sort.key(row) is None]
        present.sort(key=sort.key, reverse=sort.descending)
        ordered = present + missing
    return ordered
