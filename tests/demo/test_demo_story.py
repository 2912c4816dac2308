"""`pmsgate demo` read as a newcomer reads it, in an 80-column terminal.

The demo runs once, as a real process with COLUMNS=80 and its standard output not a
terminal (as `make demo > file` or a CI log): the story must fit the width (only a link,
key or command alone on its line may be longer, never cut), carry no log line and no
reference to documents outside the repository, keep every promise the README makes of
it, and end with a summary of the figures; the log lines are in the file it names.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

WIDTH = 80


@dataclass(frozen=True)
class DemoRun:
    stdout: str
    stderr: str
    log: Path

    @property
    def words(self) -> str:
        """The story with its wrapping undone: one space between any two words."""
        return " ".join(self.stdout.split())


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    data_dir = tmp_path_factory.mktemp("demo-data")
    env = {**os.environ, "COLUMNS": str(WIDTH), "PMSGATE_DATA_DIR": str(data_dir)}
    for name in ("PMSGATE_DATABASE_URL", "PMSGATE_REDIS_URL", "PMSGATE_LOG_LEVEL"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "pmsgate.cli", "demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return DemoRun(done.stdout, done.stderr, data_dir / "demo.log")


def test_every_line_fits_80_columns_but_a_link_or_key_alone_on_its_line(demo: DemoRun) -> None:
    too_wide = [
        line
        for line in demo.stdout.splitlines()
        if len(line.rstrip()) > WIDTH and len(line.split()) != 1
    ]
    assert too_wide == []
    assert "…" not in "".join(
        line for line in demo.stdout.splitlines() if "://" in line or "pgw_" in line
    )


def test_the_log_lines_are_in_the_file_it_names_not_in_the_story(demo: DemoRun) -> None:
    for marker in ("[warning", "[info", "[error", "[debug", "Traceback"):
        assert marker not in demo.stdout + demo.stderr
    assert demo.stdout.count(str(demo.log.resolve())) == 1
    logged = demo.log.read_text()
    # The chapter that tries a request without a browser User-Agent is warned about it.
    assert "[warning" in logged and "kross_user_agent_not_browser_style" in logged


def test_no_reference_leads_outside_the_repository(demo: DemoRun) -> None:
    assert "spec §" not in demo.stdout and "DESIGN" not in demo.stdout
    assert not re.search(r"\bissue\b", demo.stdout, re.IGNORECASE)


def test_the_keys_logins_and_links_are_shown_whole_on_their_own_line(demo: DemoRun) -> None:
    lines = [line.strip() for line in demo.stdout.splitlines()]
    keys = [line for line in lines if re.fullmatch(r"pgw_[A-Za-z0-9_-]{20,}", line)]
    links = [line for line in lines if re.fullmatch(r"https?://\S+/login/link/\S+", line)]
    assert len(keys) == 1 and len(links) == 2


def test_it_keeps_the_promises_of_the_readme(demo: DemoRun) -> None:
    for expected in (
        "token obtained",
        "it ignores date filters, so the gateway checks every stay itself",
        "pms_unknown_operation",
        "pms_out_of_scope_operation",
        "pms_edge_blocked",
        "pms_html_instead_of_json",
        "username_is_email",
        "200 rapid calls to get-in-house-guests: 200 answered",
        "upstream_budget_exhausted",
        "The tools-only key asking for a payment: 403 scope_missing",
        "sent to the booking system 1 time(s)",
        "Audit trail: the writes",
        "Facilities stored: 0",
        "20 more calls sent 0 requests",
        "MCP at /mcp: 6 tools",
        "parameters[].description required",
        "Route A: Sandbox Residence",
        "Route B: Sandbox Residence",
        "A second onboarding run of the Route A customer: succeeded, nothing changed "
        "(0 assistant-platform writes, 0 invitations)",
        "Console accounts created and invited: 2",
        'lands on its own page: HTTP 200, <html lang="it">',
        "· Sì, è collegato",
        "First contact: `pmsgate doctor --live`",
        "The server ignores offset",
        "notify-incidents, run twice: the told notices",
        "[pmsgate] Reconnected:",
    ):
        assert expected in demo.words


def test_it_ends_with_a_summary_of_the_figures(demo: DemoRun) -> None:
    summary = demo.words.split("What the demo showed", 1)[1]
    for topic, figure in (
        ("Booking system", "reservations returned for one week"),
        ("Gateway", "facilities registered, each tried upstream first"),
        ("Gateway", "200 rapid calls: 200 answered, 0 upstream requests"),
        ("Catalogue", "6 of 6 runs"),
        ("Onboarding", "a second run: nothing changed"),
        ("Console", "incident resolved"),
        ("Apps", "an assistant app connected by OAuth from the server's address alone"),
        ("Apps", "facility.connection_lost delivered 1 time(s), signature verified 1"),
        ("First contact", "the public variants:"),
    ):
        assert topic in summary and figure in summary, (topic, figure)
    assert re.search(r"\d+ tool calls over HTTP", summary)


def test_an_app_connects_with_oauth_and_a_webhook_is_signed(demo: DemoRun) -> None:
    chapter = demo.words.split("6. Apps", 1)[1].split("7. First contact", 1)[0]
    for expected in (
        "given only the server's address, http://pmsgate.local/mcp. Its first call: HTTP 401",
        "PKCE S256 only",
        "It registers itself (HTTP 201) as 'Front Desk Assistant'",
        "(HTTP 200): scope tools:read, an access token for 60 minutes",
        "check-availability over MCP with the token: HTTP 200",
        "the app's next call: HTTP 401 invalid_token",
        "runs twice (delivered 1, then 0)",
        "facility.connection_lost: signature verified.",
        "Delivery log: facility.connection_lost, delivered, 1 attempt(s), HTTP 204.",
    ):
        assert expected in chapter, expected
    assert re.search(r"consent page \(HTTP 200\) offers its one property, .+ \(\d+\)", chapter)
    assert re.search(r"event msg_[0-9a-f]{32}, facility\.connection_lost", chapter)
    # The tokens and the signing secret are never shown.
    assert not re.search(r"\b(pmo|pmr)_|whsec_", demo.stdout)
