"""The template patcher plans the spec's changes, applies them, and a second run changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from pmsgate.clock import ManualClock
from pmsgate.integrations.notion.client import NotionClient
from pmsgate.integrations.notion.models import Annotations, Block, RichText
from pmsgate.knowledge.patcher import (
    PatchPlan,
    apply_patch,
    plan_patch,
    reword_callout_text,
    wifi_title,
)
from pmsgate.knowledge.template import (
    CALLOUT_WORDS,
    GENERAL_QUALIFIER,
    WifiCredentials,
    check_page,
    section_of_title,
)
from pmsgate.sandbox.notion.app import create_notion_app
from pmsgate.sandbox.notion.store import NotionStore
from tests.knowledge.sync_support import emulated_notes

from .test_template import (
    SECTIONS,
    TEMPLATE,
    bullet,
    callout,
    full_page,
    heading,
    other_sections,
    para,
    toggle,
    wifi_toggle,
)

PASSWORD = "Pw-secret-4471"
CREDENTIALS = WifiCredentials(network="CasaRosa", password=SecretStr(PASSWORD))


def plan(blocks: list[Block], wifi: WifiCredentials | None = None) -> PatchPlan:
    return plan_patch("page-1", blocks, check_page(blocks, TEMPLATE), wifi=wifi, template=TEMPLATE)


def text_of(request_block: dict[str, Any]) -> str:
    kind = request_block["type"]
    return "".join(item["text"]["content"] for item in request_block[kind]["rich_text"])


def shown(plan: PatchPlan) -> str:
    """Everything a plan shows: its report, its repr and each change's repr."""
    return json.dumps(plan.report(), ensure_ascii=False) + repr(plan)


def complete_title(network: str = "CasaRosa", password: str = PASSWORD) -> str:
    return f"WiFi - rete {network} · password {password}"


# --- plans -------------------------------------------------------------------------------------


def test_a_canonical_page_has_an_empty_plan() -> None:
    result = plan(full_page(wifi=wifi_toggle(complete_title(), "CasaRosa", PASSWORD)))
    assert result.empty
    assert result.blockers == []


def test_missing_sections_get_only_their_canonical_blocks_appended() -> None:
    page = [toggle(complete_title()), *other_sections()[:2]]  # no rules, no departure
    result = plan(page)
    assert [c.kind for c in result.changes] == ["append_sections"]
    append = result.changes[0]
    assert append.block_id == "page-1"
    assert append.sections == ("house_rules", "before_departure")
    expected = [b for b in TEMPLATE.blocks if b.section in append.sections]
    assert [text_of(b) for b in append.payload] == [b.text for b in expected]
    assert {b["type"] for b in append.payload} <= {"heading_2", "paragraph"}


def test_a_page_without_any_section_gets_the_23_canonical_blocks_with_the_wifi_filled() -> None:
    result = plan([para("Benvenuti")], wifi=CREDENTIALS)
    (append,) = result.changes
    assert append.sections == tuple(SECTIONS)
    assert len(append.payload) == 23
    texts = [text_of(b) for b in append.payload]
    assert texts[0] == f"WiFi — Rete / Network: CasaRosa · Password: {PASSWORD}"
    assert "Rete WiFi / WiFi network: CasaRosa" in texts
    assert f"Password: {PASSWORD}" in texts
    assert not any("{" in t for t in texts)
    assert PASSWORD not in shown(result)
    assert "********" in append.description


def test_a_missing_wifi_without_credentials_is_a_blocker_and_nothing_is_invented() -> None:
    result = plan(other_sections()[:3])
    assert [b.code for b in result.blockers] == ["wifi_credentials_unknown"]
    (append,) = result.changes
    assert append.sections == ("before_departure",)


def test_a_wifi_section_without_credentials_on_the_page_is_a_blocker() -> None:
    result = plan(full_page(wifi=toggle("WiFi", para("Chiedi in chat."))))
    assert [b.code for b in result.blockers] == ["wifi_credentials_unknown"]
    assert result.empty


def test_a_wifi_title_without_credentials_gets_them_after_its_own_label() -> None:
    page = full_page(wifi=wifi_toggle("📶 Wi-Fi e Internet", "CasaRosa", PASSWORD))
    result = plan(page)
    (change,) = result.changes
    assert change.kind == "set_wifi_title"
    assert change.block_type == "toggle"
    title = text_of({"type": "toggle", "toggle": {"rich_text": change.payload}})
    assert title == f"📶 Wi-Fi e Internet — Rete / Network: CasaRosa · Password: {PASSWORD}"
    assert PASSWORD not in change.description
    assert "Password: ********" in change.description


def test_a_wifi_heading_title_is_updated_as_a_heading() -> None:
    page = [heading(2, "WiFi"), para("Rete: CasaRosa"), para(f"Password: {PASSWORD}")]
    (change,) = plan([*page, *other_sections()]).changes
    assert change.kind == "set_wifi_title"
    assert change.block_type == "heading_2"


def test_given_credentials_win_and_the_difference_is_noted() -> None:
    page = full_page(wifi=wifi_toggle(complete_title("Old", "old-pw"), "Old", "old-pw"))
    result = plan(page, wifi=CREDENTIALS)
    (change,) = result.changes
    assert change.kind == "set_wifi_title"
    assert "CasaRosa" in change.description
    assert result.notes


def test_callouts_inside_the_wifi_toggle_lose_the_words_wifi_and_internet() -> None:
    noisy = callout("Se il wifi non funziona, spegni e riaccendi il router.")
    wifi = toggle(complete_title(), para("Rete: CasaRosa"), noisy, callout("Router in sala."))
    result = plan(full_page(wifi=wifi))
    (change,) = result.changes
    assert change.kind == "reword_callout"
    assert change.block_id == noisy.id
    assert change.payload[0]["text"]["content"] == (
        "Se la rete non funziona, spegni e riaccendi il router."
    )


def test_a_reworded_callout_keeps_its_styling_and_the_network_name() -> None:
    noisy = callout("")
    noisy.rich_text = [
        RichText(plain_text="Internet veloce ", annotations=Annotations(bold=True)),
        RichText(plain_text="su Casa-WiFi", href="https://example.com/router"),
    ]
    credentials = WifiCredentials(network="Casa-WiFi", password=SecretStr("pw-9"))
    wifi = toggle("WiFi - rete Casa-WiFi · password pw-9", noisy)
    (change,) = plan(full_page(wifi=wifi), wifi=credentials).changes
    assert [i["text"]["content"] for i in change.payload] == ["Connessione veloce ", "su Casa-WiFi"]
    assert change.payload[0]["annotations"]["bold"] is True
    assert change.payload[1]["text"]["link"] == {"url": "https://example.com/router"}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "Se il wifi non funziona, spegni e riaccendi il router.",
            "Se la rete non funziona, spegni e riaccendi il router.",
        ),
        (
            "If the wifi does not work, switch the router off and on again.",
            "If the network does not work, switch the router off and on again.",
        ),
        (
            "Internet in fibra fino a 100 Mbit/s, ideale per lo smart working.",
            "Connessione in fibra fino a 100 Mbit/s, ideale per lo smart working.",
        ),
        (
            "Fibre internet up to 100 Mbit/s, good for remote work.",
            "Fibre connection up to 100 Mbit/s, good for remote work.",
        ),
        (
            "Il wifi arriva anche sul balcone. / The wifi reaches the balcony too.",
            "La rete arriva anche sul balcone. / The network reaches the balcony too.",
        ),
        ("La connessione Wi-Fi copre la casa.", "La connessione copre la casa."),
        ("The WiFi connection is free.", "The connection is free."),
        ("Password del wifi sul router.", "Password della rete sul router."),
    ],
)
def test_callout_words_are_replaced_by_readable_neutral_words(before: str, after: str) -> None:
    assert reword_callout_text(before) == after
    assert not CALLOUT_WORDS.search(after)


def test_a_first_toggle_mentioning_wifi_is_renamed_once() -> None:
    welcome = toggle("Benvenuti!", para("Il codice wifi è nella sezione WiFi più sotto."))
    page = full_page(welcome, wifi=wifi_toggle(complete_title(), "CasaRosa", PASSWORD))
    (change,) = plan(page).changes
    assert change.kind == "rename_first_toggle"
    assert change.block_id == welcome.id
    new_title = change.payload[0]["text"]["content"]
    assert new_title == f"Benvenuti! — {GENERAL_QUALIFIER}"
    assert section_of_title(new_title, TEMPLATE) is None
    renamed = toggle(new_title, para("Il codice wifi è nella sezione WiFi più sotto."))
    assert plan(full_page(renamed, wifi=wifi_toggle(complete_title(), "x", "y"))).empty


def test_a_first_toggle_titled_like_wifi_loses_the_word_when_renamed() -> None:
    first = toggle("Benvenuti e WiFi", para("Trovi il wifi sotto."))
    exact = toggle(complete_title(), para("Rete: CasaRosa"))
    (change,) = plan([first, exact, *other_sections()]).changes
    new_title = change.payload[0]["text"]["content"]
    assert "wifi" not in new_title.lower()
    assert section_of_title(new_title, TEMPLATE) is None


def test_changes_are_ordered_updates_first_and_the_append_last() -> None:
    welcome = toggle("Welcome!", para("The wifi is below."))
    wifi = toggle(
        "WiFi", para("Rete: CasaRosa"), para(f"Password: {PASSWORD}"), callout("Internet")
    )
    result = plan([welcome, wifi, toggle("House rules", bullet("No parties"))])
    assert [c.kind for c in result.changes] == [
        "rename_first_toggle",
        "set_wifi_title",
        "reword_callout",
        "append_sections",
    ]
    assert PASSWORD not in shown(result)


@pytest.mark.parametrize(
    ("network", "password"),
    [
        ("Casa Rosa 5G", "p w"),
        ("Casa · Rosa", "x"),
        ("WiFi-Casa", "password"),
        ("A/B", "c/d"),
        ("Rete: X", "Password: y"),
    ],
)
def test_the_new_wifi_title_reads_back_as_wifi_with_the_same_credentials(
    network: str, password: str
) -> None:
    credentials = WifiCredentials(network=network, password=SecretStr(password))
    title = wifi_title("WiFi", credentials, TEMPLATE)
    assert title is not None
    page = full_page(wifi=toggle(title))
    result = check_page(page, TEMPLATE)
    assert result.wifi is not None
    assert (result.wifi.network, result.wifi.password.get_secret_value()) == (network, password)
    assert result.wifi_title_complete


def test_credentials_that_cannot_read_back_from_a_title_are_a_blocker() -> None:
    credentials = WifiCredentials(network='Casa "A" · B', password=SecretStr('a "b" c'))
    result = plan(full_page(wifi=wifi_toggle("WiFi")), wifi=credentials)
    assert "wifi_title_unreadable" in [b.code for b in result.blockers]


# --- applied to the notes emulator through the real client -------------------------------------


@dataclass
class Emulated:
    store: NotionStore
    notes: NotionClient
    pages: list[dict[str, Any]]

    def writes(self) -> int:
        blocks = self.store.stats.as_dict()["blocks"]
        return int(blocks["created"] + blocks["updated"] + blocks["archived"])

    def write_requests(self) -> int:
        by_endpoint = self.store.stats.requests_by_endpoint
        return sum(n for route, n in by_endpoint.items() if not route.startswith("GET"))


def quirks(workspace: dict[str, Any]) -> tuple[bool, bool, int]:
    pages = workspace["pages"]
    return (
        any(not p["wifi_on_page"] for p in pages),
        any("heading_2" in p["section_kinds"].values() for p in pages),
        len(pages),
    )


@pytest.fixture
async def emulated() -> AsyncIterator[Emulated]:
    """The notes emulator (seed 7) and a real NotionClient on its most varied workspace."""
    clock = ManualClock()
    store = NotionStore(seed=7, clock=clock)
    # The workspace with a page without WiFi and a section written as a heading.
    workspace = max(store.workspaces(), key=quirks)
    transport = httpx.ASGITransport(app=create_notion_app(store))
    async with httpx.AsyncClient(transport=transport) as http:
        notes = emulated_notes(http, workspace["token"], clock)
        yield Emulated(store, notes, workspace["pages"])


def truth_credentials(truth: dict[str, Any]) -> WifiCredentials:
    return WifiCredentials(
        network=truth["wifi"]["network"], password=SecretStr(truth["wifi"]["password"])
    )


async def plan_page(
    emulated: Emulated, truth: dict[str, Any], *, give_wifi: bool
) -> tuple[PatchPlan, list[Block]]:
    blocks = await emulated.notes.read_tree(truth["page_id"])
    check = check_page(blocks, TEMPLATE, page_id=truth["page_id"])
    wifi = truth_credentials(truth) if give_wifi and not truth["wifi_on_page"] else None
    return plan_patch(truth["page_id"], blocks, check, wifi=wifi, template=TEMPLATE), blocks


@pytest.mark.anyio
async def test_applied_plans_make_every_seeded_page_canonical_and_a_second_apply_writes_nothing(
    emulated: Emulated,
) -> None:
    assert any(not t["sections_missing"] for t in emulated.pages)
    for truth in emulated.pages:
        first, _ = await plan_page(emulated, truth, give_wifi=True)
        assert first.blockers == []
        outcome = await apply_patch(emulated.notes, first)
        assert outcome.ok, outcome.report()
        assert len(outcome.applied) == len(first.changes)

        after = await emulated.notes.read_tree(truth["page_id"])
        check = check_page(after, TEMPLATE, page_id=truth["page_id"])
        assert check.complete and check.canonical, check.report()
        assert check.wifi is not None
        assert check.wifi.network == truth["wifi"]["network"]
        assert check.wifi.password.get_secret_value() == truth["wifi"]["password"]
        assert not check.duplicates
        # The sections the page had are still where they were.
        for key, title in truth["section_titles"].items():
            match = check.sections["checkin_checkout" if key == "check_in_out" else key]
            assert match is not None
            if key != "wifi":
                assert match.title == title
        assert PASSWORD not in shown(first)
        assert truth["wifi"]["password"] not in shown(first)

    writes = emulated.writes()
    requests = emulated.write_requests()
    assert writes > 0
    for truth in emulated.pages:
        second, _ = await plan_page(emulated, truth, give_wifi=False)
        assert second.empty and second.blockers == [], second.report()
        outcome = await apply_patch(emulated.notes, second)
        assert outcome.applied == [] and outcome.requests == 0
    assert emulated.writes() == writes
    assert emulated.write_requests() == requests


@pytest.mark.anyio
async def test_the_patch_fixes_exactly_the_quirks_the_ground_truth_lists(
    emulated: Emulated,
) -> None:
    for truth in emulated.pages:
        result, _ = await plan_page(emulated, truth, give_wifi=True)
        kinds = [c.kind for c in result.changes]
        assert ("append_sections" in kinds) == bool(truth["sections_missing"])
        assert ("reword_callout" in kinds) == truth["wifi_callout_words"]
        if truth["wifi_on_page"]:
            assert ("set_wifi_title" in kinds) == (not truth["wifi_title_complete"])
        if truth["first_toggle_mentions_wifi"]:
            assert "rename_first_toggle" in kinds


@pytest.mark.anyio
async def test_a_page_without_wifi_stays_blocked_until_credentials_are_given(
    emulated: Emulated,
) -> None:
    truth = next(t for t in emulated.pages if not t["wifi_on_page"])
    blocked, _ = await plan_page(emulated, truth, give_wifi=False)
    assert [b.code for b in blocked.blockers] == ["wifi_credentials_unknown"]
    assert all("wifi" not in c.sections for c in blocked.changes)
    await apply_patch(emulated.notes, blocked)
    still, _ = await plan_page(emulated, truth, give_wifi=False)
    assert still.empty and [b.code for b in still.blockers] == ["wifi_credentials_unknown"]
    given, _ = await plan_page(emulated, truth, give_wifi=True)
    assert [c.sections for c in given.changes] == [("wifi",)]
    assert (await apply_patch(emulated.notes, given)).ok
    after = check_page(await emulated.notes.read_tree(truth["page_id"]), TEMPLATE)
    assert after.canonical


@pytest.mark.anyio
async def test_a_failing_write_stops_the_page_and_says_which_change_failed(
    emulated: Emulated,
) -> None:
    truth = next(t for t in emulated.pages if t["wifi_on_page"] and not t["wifi_title_complete"])
    result, _ = await plan_page(emulated, truth, give_wifi=True)
    target = next(c for c in result.changes if c.kind == "set_wifi_title")
    emulated.store.set_faults(fail_ids=[target.block_id])
    outcome = await apply_patch(emulated.notes, result)
    assert not outcome.ok
    assert outcome.failed == target
    assert outcome.error is not None and outcome.error.code == "notes_unavailable"
    assert target not in outcome.applied
    emulated.store.clear_faults()
    again, _ = await plan_page(emulated, truth, give_wifi=True)
    assert (await apply_patch(emulated.notes, again)).ok
