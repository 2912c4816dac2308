"""docs/extending.md stays true: its four places exist, and its tables match the code."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import yaml

from pmsgate.gateway.tools import ANSWERS
from pmsgate.integrations.kit import ClassificationTable, ErrorKind
from pmsgate.integrations.kross.errors import CLASSIFICATION

ROOT = Path(__file__).parent.parent
EXTENDING = (ROOT / "docs" / "extending.md").read_text()


def test_each_recipe_names_a_file_that_exists() -> None:
    places = re.findall(r"`(src/pmsgate/[\w/.]+)`", EXTENDING)
    assert places
    assert [p for p in places if not (ROOT / p).exists()] == []


def test_the_answers_table_lists_exactly_the_registered_answers() -> None:
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", EXTENDING, re.MULTILINE))
    assert listed == set(ANSWERS)


def test_switching_an_error_code_to_another_kind_is_one_row_of_errors_yaml() -> None:
    text = resources.files("pmsgate.integrations.kross").joinpath("errors.yaml").read_text()
    data = yaml.safe_load(text)
    assert CLASSIFICATION.classify(200, "ACCOUNT_LOCKED", context="call") != ErrorKind.AUTH_FAILED
    # The row of the recipe, first so that it wins.
    row = yaml.safe_load("- {kind: auth_failed, context: [call], codes: [ACCOUNT_LOCKED]}")
    edited = ClassificationTable.from_data("edited", {**data, "rules": row + data["rules"]})
    assert edited.classify(200, "account_locked", context="call") == ErrorKind.AUTH_FAILED
    # Nothing else moved.
    for status, code, context in [
        (401, None, "call"),
        (429, None, "call"),
        (400, "X", "token_request"),
    ]:
        assert edited.classify(status, code, context=context) == CLASSIFICATION.classify(
            status, code, context=context
        )


def test_the_tool_example_is_the_one_the_registry_test_serves() -> None:
    from tests.gateway.test_tool_registry import ARRIVALS_TOOL

    example = EXTENDING.split("```yaml\n", 1)[1].split("```", 1)[0]
    strip = re.compile(r"\s+#.*$", re.MULTILINE)
    assert yaml.safe_load(strip.sub("", example)) == yaml.safe_load(ARRIVALS_TOOL)
