"""Accessibility checks for the browser tests: axe-core in the page, and a visible keyboard focus.

axe-core comes bundled with the ``axe-playwright-python`` dev dependency (its ``axe.min.js``;
nothing is fetched at run time). :func:`assert_accessible` runs it on the current page (WCAG
2.0/2.1 A and AA rules plus axe's best practices) and fails on any ``serious`` or ``critical``
violation: a form field without a label, text below the contrast ratio, a button without a
name, a duplicate id... Every run's violations (all impacts) are written to
``test-artifacts/accessibility/<name>.json`` so the minor ones can be read too.

axe does not check that the keyboard focus can be seen; :func:`assert_focus_visible` tabs
through the page and fails when a focused element draws neither an outline nor a box shadow.

Example::

    from tests.browser.accessibility import assert_accessible, assert_focus_visible

    page.goto(url)
    assert_accessible(page, "customer-home")
    assert_focus_visible(page)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from axe_playwright_python.sync_playwright import Axe

REPORTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "accessibility"
# What fails a test; "moderate" and "minor" are reported in the JSON file only.
FAILING_IMPACTS = frozenset({"serious", "critical"})
# The rule sets run: WCAG 2.0 and 2.1 levels A and AA, and axe's best practices.
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]

_AXE = Axe()

# The focused element's outline and box shadow, as the browser draws them.
_FOCUS_STYLE = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  return {
    tag: el.tagName.toLowerCase(),
    text: (el.innerText || el.value || el.getAttribute('aria-label') || '').slice(0, 60),
    outline: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0,
    shadow: style.boxShadow !== 'none',
  };
}"""


def violations(page: Any, *, context: str | None = None) -> list[dict[str, Any]]:
    """axe-core's violations on the current page (or within the ``context`` selector)."""
    options = {"runOnly": {"type": "tag", "values": TAGS}, "resultTypes": ["violations"]}
    results = _AXE.run(page, context=context, options=options)
    found: list[dict[str, Any]] = results.response["violations"]
    return found


def describe(found: list[dict[str, Any]]) -> str:
    """One line per violation and element: rule, impact, what is wrong, where."""
    lines = []
    for violation in found:
        for node in violation["nodes"]:
            target = ", ".join(str(t) for t in node["target"])
            lines.append(
                f"{violation['id']} ({violation['impact']}): {violation['help']} at {target}"
                f" — {node.get('failureSummary', '').strip()}"
            )
    return "\n".join(lines)


def assert_accessible(page: Any, name: str, *, context: str | None = None) -> None:
    """Fail on any serious or critical axe-core violation; the report goes to test-artifacts."""
    found = violations(page, context=context)
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"{name}.json").write_text(json.dumps(found, indent=2))
    failing = [v for v in found if v.get("impact") in FAILING_IMPACTS]
    assert not failing, f"accessibility violations on {name}:\n{describe(failing)}"


def assert_focus_visible(page: Any, *, tabs: int = 25) -> int:
    """Tab through up to ``tabs`` stops; each focused element must draw a focus indicator.

    Returns the number of elements that took the focus (at least one: a page the keyboard
    cannot enter fails too).
    """
    page.locator("body").click(position={"x": 1, "y": 1})
    seen = 0
    hidden: list[str] = []
    for _ in range(tabs):
        page.keyboard.press("Tab")
        state = page.evaluate(_FOCUS_STYLE)
        if state is None:
            continue
        seen += 1
        if not (state["outline"] or state["shadow"]):
            hidden.append(f"<{state['tag']}> {state['text']!r}")
    assert seen, "the keyboard focus never entered the page"
    assert not hidden, "focused without a visible indicator: " + "; ".join(hidden)
    return seen
