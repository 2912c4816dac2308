"""The template check finds the five canonical sections by their titles, and the WiFi."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from pmsgate.catalogue import load_catalogue
from pmsgate.clock import ManualClock
from pmsgate.integrations.notion.models import Block, RichText
from pmsgate.knowledge.template import (
    GENERAL_QUALIFIER,
    PageCheck,
    WifiCredentials,
    check_page,
    extract_wifi,
    section_of_title,
    title_label,
)
from pmsgate.sandbox.notion.app import create_notion_app
from pmsgate.sandbox.notion.store import NotionStore
from tests.knowledge.sync_support import emulated_notes

TEMPLATE = load_catalogue().knowledge
SECTIONS = TEMPLATE.section_ids()
# The emulator's seed names one section differently from the catalogue.
SEED_SECTION_IDS = {"check_in_out": "checkin_checkout"}

_ids = itertools.count(1)


# --- hand-built block trees --------------------------------------------------------------------


def block(kind: str, text: str = "", *children: Block, toggleable: bool = False) -> Block:
    """A block as NotionClient.read_tree returns it."""
    return Block(
        id=f"block-{next(_ids)}",
        type=kind,
        rich_text=[RichText(plain_text=text)] if text else [],
        children=list(children),
        has_children=bool(children),
        is_toggleable=toggleable,
    )


def toggle(title: str, *children: Block) -> Block:
    return block("toggle", title, *children)


def heading(level: int, text: str, *children: Block, toggleable: bool = False) -> Block:
    return block(f"heading_{level}", text, *children, toggleable=toggleable)


def para(text: str) -> Block:
    return block("paragraph", text)


def bullet(text: str) -> Block:
    return block("bulleted_list_item", text)


def callout(text: str) -> Block:
    return block("callout", text)


def wifi_toggle(title: str = "WiFi", network: str = "CasaRosa", password: str = "pw-123") -> Block:
    return toggle(title, para(f"Rete: {network}"), para(f"Password: {password}"))


def other_sections() -> list[Block]:
    """The four sections other than WiFi, as toggles with English titles."""
    return [
        toggle("Check-in / Check-out", para("Check-in from 15:00.")),
        toggle("How to reach us", para("Bus 12.")),
        toggle("House rules", bullet("No smoking")),
        toggle("Before departure", bullet("Close the windows")),
    ]


def full_page(*extra: Block, wifi: Block | None = None) -> list[Block]:
    return [*extra, wifi or wifi_toggle(), *other_sections()]


def check(blocks: list[Block]) -> PageCheck:
    return check_page(blocks, TEMPLATE, page_id="page-1")


# --- sections ----------------------------------------------------------------------------------


def test_a_page_with_the_five_sections_as_toggles_is_complete_and_gives_the_wifi() -> None:
    result = check(full_page())
    assert result.missing == []
    assert result.complete
    assert result.wifi is not None
    assert result.wifi.network == "CasaRosa"
    assert result.wifi.password.get_secret_value() == "pw-123"
    assert all(result.sections[s] is not None for s in SECTIONS)
    assert {m.kind for m in result.sections.values() if m} == {"toggle"}


def test_italian_titles_and_variants_with_emoji_and_accents_name_the_sections() -> None:
    page = [
        wifi_toggle("📶 Wi-Fi e Internet"),
        toggle("🕒 ORARI DI CHECK-IN e check-out", para("Dalle 15.")),
        toggle("Come arrivare?", para("Autobus 12.")),
        toggle("Regolamento della casa", bullet("Vietato fumare")),
        toggle("Prima di partire…", bullet("Chiudi le finestre")),
    ]
    result = check(page)
    assert result.complete
    titles = [match.title if match else None for match in result.sections.values()]
    assert titles == [b.plain_text for b in page]


def test_a_page_without_any_section_misses_all_five() -> None:
    result = check([heading(1, "Benvenuti"), para("Testo"), toggle("Parcheggio", para("Via"))])
    assert result.missing == SECTIONS
    assert not result.complete
    assert result.wifi is None


def test_a_heading_section_has_the_blocks_up_to_the_next_heading_of_its_level_as_body() -> None:
    rules = heading(2, "Regole della casa / House rules")
    body = [bullet("No smoking"), heading(3, "Animali"), para("Solo su richiesta")]
    after = heading(2, "Dintorni")
    page = [wifi_toggle(), rules, *body, after, para("Il parco"), *other_sections()[:2]]
    page.append(other_sections()[3])
    result = check(page)
    match = result.sections["house_rules"]
    assert match is not None
    assert match.kind == "heading_2"
    assert match.body_block_ids == [b.id for b in body]
    assert result.complete


def test_a_heading_section_body_stops_at_the_next_section_toggle() -> None:
    wifi = heading(2, "WiFi")
    body = [para("Rete: CasaRosa"), para("Password: pw-123")]
    page = [wifi, *body, *other_sections()]
    result = check(page)
    match = result.sections["wifi"]
    assert match is not None and match.body_block_ids == [b.id for b in body]
    assert result.wifi is not None and result.wifi.network == "CasaRosa"


def test_a_toggleable_heading_has_its_children_as_body_not_its_siblings() -> None:
    wifi = heading(3, "WiFi", para("Rete: CasaRosa"), para("Password: pw-123"), toggleable=True)
    page = [wifi, para("Network: NotThisOne"), *other_sections()]
    result = check(page)
    assert result.sections["wifi"] is not None
    assert result.sections["wifi"].kind == "heading_3"
    assert result.wifi is not None and result.wifi.network == "CasaRosa"


def test_a_higher_heading_ends_a_lower_heading_section() -> None:
    page = [
        heading(3, "WiFi"),
        para("Rete: CasaRosa"),
        heading(1, "Altre cose"),
        para("Password: not-the-wifi-one"),
        *other_sections(),
    ]
    result = check(page)
    assert result.sections["wifi"] is not None
    assert result.wifi is None
    assert not result.complete
    assert any("password" in note for note in result.notes)


def test_a_welcome_toggle_whose_children_mention_wifi_is_not_the_wifi_section() -> None:
    welcome = toggle("Benvenuti!", para("Il codice wifi è nella sezione WiFi più sotto."))
    result = check([welcome, *other_sections()])
    assert result.sections["wifi"] is None
    assert result.missing == ["wifi"]
    assert result.misleading_first_toggle == welcome.id


def test_the_misleading_first_toggle_is_reported_until_it_is_renamed() -> None:
    welcome = toggle("Benvenuti!", para("The wifi code is below."))
    assert check(full_page(welcome)).misleading_first_toggle == welcome.id
    renamed = toggle(f"Benvenuti! — {GENERAL_QUALIFIER}", para("The wifi code is below."))
    assert check(full_page(renamed)).misleading_first_toggle is None


def test_a_first_toggle_that_is_the_wifi_section_is_not_misleading() -> None:
    result = check(full_page())
    assert result.misleading_first_toggle is None
    assert result.canonical is False  # the WiFi title lacks the credentials


def test_callouts_and_bodies_saying_wifi_never_make_a_section() -> None:
    page = [
        callout("WiFi: chiedi a noi la password"),
        toggle("Televisione", para("La smart TV è collegata a internet.")),
        toggle("Lavorare da remoto", para("The wifi connection handles video calls.")),
        *other_sections(),
    ]
    result = check(page)
    assert result.sections["wifi"] is None
    assert result.missing == ["wifi"]


def test_a_variant_inside_a_longer_word_does_not_name_a_section() -> None:
    page = [toggle("Internetpoint vicini"), toggle("Orario del supermercato"), toggle("Wifiless")]
    assert check(page).missing == SECTIONS


def test_nested_toggles_are_part_of_their_parent_not_sections() -> None:
    page = [toggle("Informazioni utili", wifi_toggle()), *other_sections()]
    assert check(page).missing == ["wifi"]


def test_columns_are_see_through() -> None:
    columns = block("column_list", "", block("column", "", wifi_toggle()))
    result = check([columns, *other_sections()])
    assert result.complete


def test_archived_blocks_are_ignored() -> None:
    wifi = wifi_toggle()
    wifi.archived = True
    assert check([wifi, *other_sections()]).missing == ["wifi"]


def test_of_several_wifi_toggles_the_exact_canonical_title_wins_and_the_others_are_reported() -> (
    None
):
    first = wifi_toggle("Wi-Fi e Internet", network="Other")
    exact = wifi_toggle("WiFi")
    result = check([first, exact, *other_sections()])
    match = result.sections["wifi"]
    assert match is not None and match.block_id == exact.id and match.exact
    assert result.duplicates == {"wifi": [first.id]}
    assert result.wifi is not None and result.wifi.network == "CasaRosa"
    assert result.notes


def test_of_several_candidates_without_an_exact_title_the_first_wins() -> None:
    first = toggle("Regolamento", bullet("a"))
    second = toggle("Norme della casa", bullet("b"))
    result = check([wifi_toggle(), first, second, *other_sections()[:2], other_sections()[3]])
    match = result.sections["house_rules"]
    assert match is not None and match.block_id == first.id and not match.exact
    assert result.duplicates["house_rules"] == [second.id]


def test_the_longest_variant_decides_between_two_sections() -> None:
    assert section_of_title("Istruzioni per il check-out", TEMPLATE) == "before_departure"
    assert section_of_title("Check-out", TEMPLATE) == "checkin_checkout"


def test_credentials_in_a_wifi_title_do_not_move_it_to_another_section() -> None:
    title = "WiFi - rete Location-House · password rules123"
    assert TEMPLATE.section_of(title) != "wifi"  # the values alone would mislead
    assert section_of_title(title, TEMPLATE) == "wifi"
    result = check(full_page(wifi=toggle(title)))
    assert result.wifi is not None and result.wifi.network == "Location-House"
    assert result.wifi_title_complete
    assert result.sections["wifi"] is not None and result.sections["wifi"].exact


# --- WiFi credentials --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "lines", "network", "password"),
    [
        ("WiFi - rete CasaRosa · password abc123", [], "CasaRosa", "abc123"),
        ("WiFi - rete/network Sandbox-Rosa · password k9", [], "Sandbox-Rosa", "k9"),
        ("WiFi: CasaRosa / pass123", [], "CasaRosa", "pass123"),
        ("WiFi — CasaRosa | pass123", [], "CasaRosa", "pass123"),
        ("WiFi — Rete / Network: Casa Rosa 5G · Password: p4ss", [], "Casa Rosa 5G", "p4ss"),
        ('WiFi — Rete / Network: Casa · Password: "a b c"', [], "Casa", "a b c"),
        ("WiFi", ["SSID: Casa_Rosa", "PW: xyz!"], "Casa_Rosa", "xyz!"),
        ("WiFi", ["Nome rete: Casa Rosa", "Chiave WiFi: k3y"], "Casa Rosa", "k3y"),
        ("WiFi", ["Network Sandbox-Rosa, password abc123."], "Sandbox-Rosa", "abc123"),
        ("Internet", ["La password è: abc123", "Rete / Network: Casa"], "Casa", "abc123"),
        ("Wi-Fi", ["• Network: Casa (5 GHz)", "- Password = pa55"], "Casa", "pa55"),
        ("WiFi", ["WiFi network: Casa", "WiFi password: 'x y'"], "Casa", "x y"),
    ],
)
def test_wifi_credentials_are_read_from_the_documented_patterns(
    title: str, lines: list[str], network: str, password: str
) -> None:
    body = [para(line) for line in lines]
    result = check(full_page(wifi=toggle(title, *body)))
    assert result.wifi is not None, result.notes
    assert (result.wifi.network, result.wifi.password.get_secret_value()) == (network, password)


@pytest.mark.parametrize(
    ("title", "lines"),
    [
        ("Password WiFi", ["The network is fast and the password is on the router."]),
        ("Rete WiFi", ["Chiedi la password in chat."]),
        ("WiFi / Internet", ["Key box: next to the door"]),
        ("WiFi", ["Password cassaforte: 1234"]),
    ],
)
def test_words_that_only_look_like_credentials_are_not_taken(title: str, lines: list[str]) -> None:
    result = check(full_page(wifi=toggle(title, *[para(line) for line in lines])))
    assert result.wifi is None
    assert result.sections["wifi"] is not None
    assert not result.complete


def test_the_title_wins_over_the_body_and_the_disagreement_is_noted() -> None:
    wifi = toggle("WiFi - rete New · password new-pw", para("Rete: Old"), para("Password: old"))
    result = check(full_page(wifi=wifi))
    assert result.wifi is not None
    assert (result.wifi.network, result.wifi.password.get_secret_value()) == ("New", "new-pw")
    assert any("disagree" in note for note in result.notes)


def test_a_title_with_only_the_network_is_completed_from_the_body_but_is_not_complete() -> None:
    wifi = toggle("WiFi - rete CasaRosa", para("Password: pw-1"))
    result = check(full_page(wifi=wifi))
    assert result.wifi is not None and result.wifi.password.get_secret_value() == "pw-1"
    assert not result.wifi_title_complete


def test_title_label_is_the_title_without_its_credentials() -> None:
    assert title_label("📶 Wi-Fi e Internet") == "📶 Wi-Fi e Internet"
    assert title_label("WiFi - rete CasaRosa · password abc") == "WiFi"
    assert title_label("WiFi: CasaRosa / pass123") == "WiFi"
    assert title_label("Password WiFi: abc") == ""


def test_extract_wifi_notion_a_second_different_network() -> None:
    network, password, notes = extract_wifi(["Rete: A", "Rete: B", "Password: x"])
    assert (network, password) == ("A", "x")
    assert notes


# --- callouts inside the WiFi section ----------------------------------------------------------


def test_callouts_inside_the_wifi_section_saying_wifi_or_internet_are_reported() -> None:
    with_words = callout("Internet in fibra fino a 100 Mbit/s.")
    quiet = callout("Il router è nell'ingresso.")
    wifi = toggle("WiFi", para("Rete: CasaRosa"), para("Password: pw-123"), with_words, quiet)
    result = check(full_page(wifi=wifi))
    assert result.wifi_callouts == [with_words.id]


def test_a_callout_quoting_a_network_name_with_wifi_in_it_is_not_reported() -> None:
    quoting = callout("Connettiti a Casa-WiFi-5G.")
    wifi = toggle("WiFi", para("Rete: Casa-WiFi-5G"), para("Password: pw-123"), quoting)
    assert check(full_page(wifi=wifi)).wifi_callouts == []


def test_callouts_outside_the_wifi_section_are_not_reported() -> None:
    page = full_page(toggle("Televisione", callout("La TV va su internet.")))
    assert check(page).wifi_callouts == []


# --- the password is a secret ------------------------------------------------------------------


def test_the_password_is_never_in_the_report_the_repr_or_a_dump() -> None:
    password = "s3cret-Pw-991"
    wifi = toggle(f"WiFi - rete CasaRosa · password {password}")
    result = check([wifi, wifi_toggle("Wi-Fi"), *other_sections()])
    assert result.wifi is not None and result.wifi.password.get_secret_value() == password
    assert password not in json.dumps(result.report(), ensure_ascii=False)
    assert password not in repr(result)
    assert password not in result.model_dump_json()
    assert result.report()["wifi"] == {"network": "CasaRosa", "password": "found"}


def test_wifi_credentials_refuse_multi_line_or_blank_values() -> None:
    with pytest.raises(ValueError):
        WifiCredentials(network="Casa", password=SecretStr("a\nb"))
    with pytest.raises(ValueError):
        WifiCredentials(network=" ", password=SecretStr("x"))


# --- every seeded page of the notes emulator ---------------------------------------------------


async def _seeded_checks(seed: int) -> list[tuple[dict[str, Any], PageCheck, list[Block]]]:
    clock = ManualClock()
    store = NotionStore(seed=seed, clock=clock)
    app = create_notion_app(store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as control:
        answer = await control.get("http://notes.test/_sandbox/workspaces")
        workspaces = answer.json()
    results = []
    for workspace in workspaces:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
        notes = emulated_notes(http, workspace["token"], clock)
        async with http:
            for truth in workspace["pages"]:
                blocks = await notes.read_tree(truth["page_id"])
                results.append((truth, check_page(blocks, TEMPLATE), blocks))
    return results


@pytest.mark.anyio
# Seed 18 also has a page whose first toggle is a topic with a stray "wifi" and no welcome.
@pytest.mark.parametrize("seed", [7, 18])
async def test_every_seeded_page_matches_the_emulators_ground_truth(seed: int) -> None:
    results = await _seeded_checks(seed)
    assert results
    for truth, result, blocks in results:
        label = f"{truth['title']} ({truth['language']})"
        missing = [SEED_SECTION_IDS.get(s, s) for s in truth["sections_missing"]]
        assert result.missing == [s for s in SECTIONS if s in missing], label
        for key, title in truth["section_titles"].items():
            match = result.sections[SEED_SECTION_IDS.get(key, key)]
            assert match is not None, label
            assert match.title == title, label
            assert match.kind == truth["section_kinds"][key], label
        assert result.complete == (not missing), label
        if truth["wifi_on_page"]:
            assert result.wifi is not None, label
            assert result.wifi.network == truth["wifi"]["network"], label
            assert result.wifi.password.get_secret_value() == truth["wifi"]["password"], label
            assert result.wifi_title_complete == truth["wifi_title_complete"], label
            assert bool(result.wifi_callouts) == truth["wifi_callout_words"], label
        else:
            assert result.wifi is None, label
        assert not result.duplicates, label
        if truth["first_toggle_mentions_wifi"]:
            assert result.misleading_first_toggle is not None, label
        elif result.misleading_first_toggle is not None:
            # Without a welcome toggle, a first topic toggle may carry a stray "wifi" itself.
            assert truth["stray_wifi_mentions"], label
            first = next(b for b in blocks if b.id == result.misleading_first_toggle)
            assert "wifi" in first.body_text().lower(), label


def test_the_seed_has_every_quirk_the_check_must_survive() -> None:
    workspaces = NotionStore(seed=7, clock=ManualClock()).workspaces()
    truths = [truth for workspace in workspaces for truth in workspace["pages"]]
    assert any(t["sections_missing"] for t in truths)
    assert any("wifi" in t["sections_missing"] for t in truths)
    assert any(t["first_toggle_mentions_wifi"] for t in truths)
    assert any(t["wifi_callout_words"] for t in truths)
    assert any(t["stray_wifi_mentions"] for t in truths)
    assert any("heading_2" in t["section_kinds"].values() for t in truths)
    assert any(t["wifi_on_page"] and not t["wifi_title_complete"] for t in truths)
