"""The alert rules and the dashboard use only metrics the app exports, and each alert is
one a person can act on: a `for:`, a summary, a description naming the replica or the
facility, an absolute runbook link to a section of docs/runbook.md that exists, and a
promtool unit test that fires it and one that does not.

A running gateway is scraped after some traffic (a tool call, a scheduled job's run) and
the sample names it can export are compared with every name in the rules' expressions and
the dashboard's queries: a renamed metric fails here, not silently in production.
``promtool`` (Debian: the ``prometheus`` package, installed by the test when missing;
skipped locally where it cannot be, a failure under CI=true) checks the rules and runs
their unit tests (deploy/prometheus/alerts_test.yaml).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from pmsgate.clock import ManualClock
from pmsgate.jobs.runs import JobRuns
from pmsgate.jobs.scheduler import Scheduler
from pmsgate.jobs.spec import Job
from tests.debian import debian_program
from tests.e2e.conftest import add_seeded_facility, gateway_settings, running_gateway

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yaml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "pmsgate.json"
OPERATIONS = ROOT / "docs" / "operations.md"
RUNBOOK = ROOT / "docs" / "runbook.md"
# The absolute base of every runbook_url (docs/operations.md, "The alerts": replace it with
# where your copy of the repository is published).
RUNBOOK_BASE = "https://github.com/example-org/pmsgate/blob/main/docs/runbook.md"
# Whom a description names: the replica, the facility or the scheduled job (a label of the
# alert), or the facilities a query of its own finds.
NAMES = re.compile(r"\$labels\.(instance|hotel_id|scheduled_job)\b|\.Labels\.hotel_id\b")
# An alert about every replica at once has no instance left to name.
ABOUT_ALL_REPLICAS = {"PmsgateTargetsMissing"}
TEMPLATE_QUERY = re.compile(r'query "((?:[^"\\]|\\.)*)"')

METRIC_NAME = re.compile(r"\b(pmsgate_[a-z0-9_]+)\b")
# Series Prometheus makes itself, per scrape target.
PROMETHEUS_OWN = {"up"}
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def dashboard_queries() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def names_in(expression: str) -> set[str]:
    names = set(METRIC_NAME.findall(expression))
    names |= {name for name in PROMETHEUS_OWN if re.search(rf"\b{name}\{{", expression)}
    return names


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the headings: lower case, punctuation dropped, spaces to dashes."""
    found = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return found


@pytest.fixture
async def exported(
    sqlite_url: str, kross_http: httpx.AsyncClient, kross_store: Any, clock: ManualClock
) -> tuple[set[str], set[str]]:
    """The sample names and metric families a gateway exports after some traffic."""
    async with running_gateway(gateway_settings(sqlite_url), kross_http, clock) as gateway:
        _, key = await add_seeded_facility(gateway.services, kross_store)
        assert (await gateway.tool("get-in-house-guests", key)).status_code == 200
        runs = JobRuns(gateway.container.customers.sessions, clock)
        jobs = Scheduler([Job("noop", 60, noop)], clock, runs, metrics=gateway.services.metrics)
        await jobs.run_once("noop")
        transport = httpx.ASGITransport(app=gateway.app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as c:
            answer = await c.get("/metrics")
    assert answer.status_code == 200
    samples: set[str] = set()
    families: set[str] = set()
    for family in text_string_to_metric_families(answer.text):
        families.add(family.name)
        samples |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
        samples |= {sample.name for sample in family.samples}
    return samples, families


async def noop() -> dict[str, Any]:
    return {}


def annotation_queries(rule: dict[str, Any]) -> list[str]:
    """The PromQL of the ``query "…"`` calls in an alert's annotation templates."""
    texts = rule["annotations"].values()
    return [m.replace('\\"', '"') for text in texts for m in TEMPLATE_QUERY.findall(text)]


def test_every_alert_is_one_a_person_can_act_on() -> None:
    rules = alert_rules()
    documented = anchors(RUNBOOK.read_text())
    names = [rule["alert"] for rule in rules]
    assert len(set(names)) == len(names)
    for rule in rules:
        name, annotations = rule["alert"], rule["annotations"]
        assert rule.get("for"), f"{name} has no for: (one bad scrape would page)"
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}
        assert annotations["summary"].strip() and "\n" not in annotations["summary"], name
        description = annotations["description"]
        assert len(description) > len(annotations["summary"]), name
        assert NAMES.search(description) or name in ABOUT_ALL_REPLICAS, (
            f"{name}: the description names no replica, facility or job"
        )
        path, _, anchor = annotations["runbook_url"].partition("#")
        assert path == RUNBOOK_BASE, name
        assert anchor == name.lower(), name
        assert anchor in documented, f"no heading '{name}' in docs/runbook.md"


def test_every_alert_has_a_unit_test_that_fires_it_and_one_that_does_not() -> None:
    cases = [
        case
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
    ]
    fired = {case["alertname"] for case in cases if case["exp_alerts"]}
    quiet = {case["alertname"] for case in cases if not case["exp_alerts"]}
    names = {rule["alert"] for rule in alert_rules()}
    assert not names - fired, f"alerts_test.yaml never fires {sorted(names - fired)}"
    assert not names - quiet, f"alerts_test.yaml never checks {sorted(names - quiet)} stays quiet"
    assert (fired | quiet) <= names, "alerts_test.yaml tests an alert that does not exist"


def test_the_runbook_anchor_check_would_see_a_missing_section() -> None:
    assert "pmsgatereplicadown" in anchors("## PmsgateReplicaDown\n")
    assert "pmsgatereplicadown" not in anchors("## PmsgateReplicaGone\n")


@pytest.mark.anyio
async def test_rules_and_dashboard_use_only_exported_metrics(
    exported: tuple[set[str], set[str]],
) -> None:
    samples, _ = exported
    available = samples | PROMETHEUS_OWN
    expressions = {f"alert {rule['alert']}": rule["expr"] for rule in alert_rules()}
    expressions |= {
        f"alert {rule['alert']}'s annotation query {i}": query
        for rule in alert_rules()
        for i, query in enumerate(annotation_queries(rule))
    }
    expressions |= {f"dashboard query {i}": expr for i, expr in enumerate(dashboard_queries())}
    used = set()
    for where, expression in expressions.items():
        names = names_in(expression)
        assert names, f"{where} uses no metric of pmsgate"
        assert names <= available, f"{where} uses {sorted(names - available)}: not exported"
        used |= names
    assert {
        "pmsgate_facility_error",
        "pmsgate_job_runs_total",
        "pmsgate_upstream_request_seconds_count",
        "pmsgate_upstream_request_seconds_bucket",
        "pmsgate_knowledge_sync_jobs_finished_total",
        "pmsgate_audit_events_total",
        "pmsgate_budget_used",
    } <= used


@pytest.mark.anyio
async def test_every_exported_metric_is_described_in_the_operations_guide(
    exported: tuple[set[str], set[str]],
) -> None:
    _, families = exported
    guide = OPERATIONS.read_text()
    missing = sorted(
        name
        for name in families
        if name.startswith("pmsgate_") and not name.endswith("_created") and name not in guide
    )
    assert not missing, f"docs/operations.md (What to watch) does not describe {missing}"


def test_the_checker_would_see_a_renamed_metric() -> None:
    assert names_in('sum(rate(pmsgate_tool_calls_totl[5m])) > 0 or up{job="x"} == 0') == {
        "pmsgate_tool_calls_totl",
        "up",
    }


def test_promtool_checks_the_rules_and_runs_their_unit_tests() -> None:
    promtool = debian_program("promtool", "prometheus")
    checked = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", RULE_TESTS.name],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=RULE_TESTS.parent,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
