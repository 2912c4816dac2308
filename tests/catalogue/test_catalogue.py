"""The packaged catalogue: it loads, passes its own lint, and has what the specification counts."""

from __future__ import annotations

import pytest

from pmsgate.catalogue import (
    ESCALATION_LANGUAGE_ID,
    PAYMENT_SKILL_NAME,
    SPEC_TOOL_NAMES,
    STANDARD_SKILL_NAMES,
    Catalogue,
    CustomerProfile,
    inspect_catalogue,
    lint_catalogue,
    load_catalogue,
    load_tools,
    skills_for,
)

from .support import check


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return load_catalogue()


def test_packaged_catalogue_loads_and_the_lint_finds_nothing(catalogue):
    assert inspect_catalogue().problems == []
    assert lint_catalogue(catalogue) == []
    assert catalogue.version
    assert len(catalogue.digest) == 16


def test_check_command_prints_the_counts_and_exits_zero():
    result = check()
    assert result.exit_code == 0, result.output
    assert "catalogue v2 OK: 6 tools, 4 skills, 24 guardrails, 5 sections, 23 blocks" in (
        result.output
    )


def test_catalogue_has_the_six_tools_of_the_spec_and_the_gateway_serves_the_same(catalogue):
    assert sorted(catalogue.tools) == sorted(SPEC_TOOL_NAMES)
    assert load_tools() is catalogue.tools
    for tool in catalogue.tools.values():
        assert tool.execution_message_description
        for parameter in tool.parameters.values():
            assert len(parameter.description.split()) >= 4


def test_custom_tool_body_has_the_assistant_shape(catalogue):
    body = catalogue.tools["check-availability"].custom_tool_body("ws-1")
    assert set(body) == {
        "workspace_id",
        "name",
        "description",
        "language",
        "code",
        "parameters",
        "execution_message_description",
        "enable_globally",
    }
    assert body["workspace_id"] == "ws-1"
    assert body["language"] == "python"
    assert body["enable_globally"] is True
    assert body["parameters"]["arrival"]["required"] is True
    assert body["parameters"]["apartment_id"] == {
        "type": "integer",
        "required": False,
        "description": catalogue.tools["check-availability"].parameters["apartment_id"].description,
    }
    assert 'TOOL_NAME = "check-availability"' in body["code"]


def test_at_least_21_guardrails_including_the_italian_escalation_one(catalogue):
    assert len(catalogue.guardrails) >= 21
    escalation = catalogue.escalation_guardrail
    assert escalation.id == ESCALATION_LANGUAGE_ID
    assert "Italian" in escalation.knowledge
    assert "guest's own language" in escalation.knowledge


def test_three_standard_skills_for_everyone_and_payment_links_only_when_autonomous(catalogue):
    standard = [s.name for s in skills_for(CustomerProfile())]
    assert standard == list(STANDARD_SKILL_NAMES)
    for profile in (
        {"upsell_autonomous": True},
        {"late_checkin_autonomous": True},
        {"upsell_autonomous": True, "late_checkin_autonomous": True},
    ):
        assert [s.name for s in skills_for(profile)] == [*standard, PAYMENT_SKILL_NAME]
    for skill in catalogue.skills.values():
        assert set(skill.allowed_tools) <= set(catalogue.tools)
        body = skill.assistant_body("ws-1")
        assert set(body) == {
            "workspace_id",
            "name",
            "display_name",
            "description",
            "body",
            "allowed_tools",
            "tags",
            "enabled",
        }


def test_an_unknown_profile_flag_is_refused():
    with pytest.raises(ValueError, match="extra"):
        skills_for({"upsells": True})


def test_agent_body_is_a_copilot_in_the_guests_language_with_every_guardrail(catalogue):
    body = catalogue.agent_body("ws-1", ["sk-1", "sk-2", "sk-3"])
    assert body["operation_mode"] == "copilot"
    assert body["enabled"] is True
    assert body["response_language"] == "Original"
    assert body["skill_ids"] == ["sk-1", "sk-2", "sk-3"]
    assert body["guardrails"] == [
        {"title": g.title, "knowledge": g.knowledge} for g in catalogue.guardrails
    ]
    assert body["triggers"] == [
        {
            "name": "Guest inbox messages",
            "type": "message",
            "config": {"inboxTypeId": "guest", "channels": []},
            "enabled": True,
        }
    ]
    assert catalogue.agent_problems(body, ["sk-1"]) == []


def test_agent_check_flags_escalation_language_set_through_response_language(catalogue):
    body = catalogue.agent_body("ws-1", ["sk-1"])
    body["response_language"] = "Italian"
    body["guardrails"] = [
        g for g in body["guardrails"] if g["title"] != catalogue.escalation_guardrail.title
    ]
    problems = catalogue.agent_problems(body, ["sk-1", "sk-2"])
    assert any("response_language" in p for p in problems)
    assert any(ESCALATION_LANGUAGE_ID in p for p in problems)
    assert any("sk-2" in p for p in problems)


def test_knowledge_template_renders_23_notion_blocks_with_the_wifi_credentials(catalogue):
    values = {"wifi_network": "NET-A", "wifi_password": "pass-b"}
    blocks = [block.render(values) for block in catalogue.knowledge.blocks]
    assert len(blocks) == 23
    assert {b["type"] for b in blocks} == {"heading_2", "paragraph"}
    assert blocks[0] == {
        "object": "block",
        "type": "heading_2",
        "heading_2": {"rich_text": [{"type": "text", "text": {"content": "WiFi"}}]},
    }
    contents = [b[b["type"]]["rich_text"][0]["text"]["content"] for b in blocks]
    assert any("NET-A" in c for c in contents)
    assert any("pass-b" in c for c in contents)
    assert not any("{" in c for c in contents)
    headings = [c for b, c in zip(blocks, contents, strict=True) if b["type"] == "heading_2"]
    assert [catalogue.knowledge.section_of(h) for h in headings] == (
        catalogue.knowledge.section_ids()
    )


@pytest.mark.parametrize(
    ("title", "section"),
    [
        ("📶 Wi-Fi e password", "wifi"),
        ("WiFi: NETWORK / secret", "wifi"),
        ("Internet", "wifi"),
        ("Orari di check-in e check-out", "checkin_checkout"),
        ("Arrivo e partenza", "checkin_checkout"),
        ("Istruzioni per il check-out", "before_departure"),
        ("Prima della partenza", "before_departure"),
        ("Come raggiungerci in auto", "how_to_reach"),
        ("HOUSE RULES", "house_rules"),
        ("Regolamento della struttura", "house_rules"),
        ("Raccolta differenziata", None),
        ("Ristoranti consigliati", None),
    ],
)
def test_section_titles_and_their_variants_are_recognised(catalogue, title, section):
    assert catalogue.knowledge.section_of(title) == section
