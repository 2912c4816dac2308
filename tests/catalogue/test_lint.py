"""The lint catches each kind of personal data and code, and loading refuses such a catalogue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pmsgate.catalogue import CatalogueError, lint_text, read_catalogue

from .support import check, copy_catalogue, edit_yaml

PORTAL_ID = ("tools.yaml", "tools.check-portal-status.parameters.reservation_id.description")


def _append_to_parameter(text: str):  # type: ignore[no-untyped-def]
    def change(data: dict[str, Any]) -> None:
        parameter = data["tools"]["check-portal-status"]["parameters"]["reservation_id"]
        parameter["description"] += f" {text}"

    return change


@pytest.mark.parametrize(
    ("inserted", "kind"),
    [
        ("For example call +39 333 123 4567.", "phone"),
        ("Oppure chiama lo 02 8736 1124.", "phone"),
        ("Ask the front desk at host.helper@gmail.com.", "email"),
        ("Ask Giulia Bianchi at the desk.", "person_name"),
        ("Chiedi al Sig. Esposito.", "person_name"),
        ("The door code is 4812.", "access_code"),
        ("Codice cassetta: 0591#.", "access_code"),
        ("For example HMXK4Q8ZT2.", "booking_code"),
        ("For example 1029384756 from the channel.", "booking_code"),
        ("Use the key pgw_Zk3v9QqL0sT7bW2mXyR5nP8cF1dG4hJ6aE0uI9oK2lM.", "secret"),
    ],
)
def test_check_fails_and_names_the_field_with_personal_data(tmp_path, inserted, kind):
    directory = copy_catalogue(tmp_path / "catalogue")
    edit_yaml(directory, "tools.yaml", _append_to_parameter(inserted))

    result = check(directory)

    assert result.exit_code == 1, result.output
    assert PORTAL_ID[1] in result.output
    assert kind in result.output
    with pytest.raises(CatalogueError) as refused:
        read_catalogue(directory)
    assert [(p.where, p.kind) for p in refused.value.problems] == [(": ".join(PORTAL_ID), kind)]
    assert refused.value.code == "catalogue_invalid"


@pytest.mark.parametrize(
    ("file", "change", "where"),
    [
        (
            "skills.yaml",
            lambda d: d["skills"]["check-in-access-manager"].__setitem__(
                "body", d["skills"]["check-in-access-manager"]["body"] + "\nCall 333 1234567.\n"
            ),
            "skills.yaml: skills.check-in-access-manager.body",
        ),
        (
            "guardrails.yaml",
            lambda d: d["guardrails"][3].__setitem__(
                "knowledge", d["guardrails"][3]["knowledge"] + " Write to ops@example.com."
            ),
            "guardrails.yaml: access-after-check-in.knowledge",
        ),
        (
            "agent.yaml",
            lambda d: d.__setitem__("instructions", d["instructions"] + "\nAsk Mr. Brown.\n"),
            "agent.yaml: instructions",
        ),
        (
            "knowledge.yaml",
            lambda d: d["blocks"][2].__setitem__("text", "Password: {wifi_password} (PIN 2580)"),
            "knowledge.yaml: blocks[2].text",
        ),
    ],
)
def test_personal_data_is_found_in_skills_guardrails_agent_and_template(
    tmp_path, file, change, where
):
    directory = copy_catalogue(tmp_path / "catalogue")
    edit_yaml(directory, file, change)

    result = check(directory)

    assert result.exit_code == 1, result.output
    assert where in result.output


def test_a_parameter_without_description_is_reported(tmp_path):
    directory = copy_catalogue(tmp_path / "catalogue")

    def drop(data: dict[str, Any]) -> None:
        del data["tools"]["check-availability"]["parameters"]["arrival"]["description"]
        data["tools"]["get-in-house-guests"]["parameters"]["date"]["description"] = "A date."

    edit_yaml(directory, "tools.yaml", drop)

    result = check(directory)

    assert result.exit_code == 1
    assert "missing_description" in result.output
    assert "tools.check-availability.parameters.arrival.description" in result.output


@pytest.mark.parametrize(
    ("file", "change", "fragment"),
    [
        ("guardrails.yaml", lambda d: d.__setitem__("guardrails", d["guardrails"][:20]), "21"),
        (
            "guardrails.yaml",
            lambda d: d.__setitem__("guardrails", d["guardrails"][1:]),
            "escalation-language",
        ),
        ("knowledge.yaml", lambda d: d.__setitem__("blocks", d["blocks"][:22]), "23"),
        ("knowledge.yaml", lambda d: d["blocks"][1].__setitem__("type", "callout"), "blocks.1"),
        ("knowledge.yaml", lambda d: d.__setitem__("sections", d["sections"][:4]), "5"),
        ("agent.yaml", lambda d: d.__setitem__("response_language", "Italian"), "Original"),
        ("agent.yaml", lambda d: d.__setitem__("operation_mode", "autopilot"), "copilot"),
        (
            "tools.yaml",
            lambda d: d["tools"].__setitem__("get-contract", d["tools"].pop("check-portal-status")),
            "check-portal-status",
        ),
        (
            "skills.yaml",
            lambda d: d["skills"]["payment-link-generator"].__setitem__("attach_when", "always"),
            "payment-link-generator",
        ),
        (
            "skills.yaml",
            lambda d: d["skills"]["booking-extension-assistant"].__setitem__(
                "allowed_tools", ["make-booking"]
            ),
            "make-booking",
        ),
    ],
)
def test_counts_and_fixed_values_of_the_spec_are_enforced(tmp_path, file, change, fragment):
    directory = copy_catalogue(tmp_path / "catalogue")
    edit_yaml(directory, file, change)

    result = check(directory)

    assert result.exit_code == 1, result.output
    assert file in result.output
    assert fragment in result.output


def test_a_copy_cannot_relax_the_lint_rules(tmp_path):
    directory = copy_catalogue(tmp_path / "catalogue")
    (directory / "lint_rules.yaml").write_text("phone_regions: []\n", "utf-8")
    edit_yaml(directory, "tools.yaml", _append_to_parameter("Call +39 333 123 4567."))

    assert check(directory).exit_code == 1


def test_an_unchanged_copy_passes(tmp_path):
    result = check(copy_catalogue(tmp_path / "catalogue"))

    assert result.exit_code == 0, result.output
    assert "OK" in result.output


@pytest.mark.parametrize(
    "text",
    [
        "Day the guest arrives, as a year-month-day date such as the first of June.",
        "Range of at most 60 days; 2,000 characters; call the emergency number 112.",
        "Reservations from 2026-06-01 to 2026-06-07, booking 01/06/2026.",
        "Maria, Marina and Rosa are common words here; Check-in / Check-out.",
        "reservation-status-verification-procedure and check-in-access-manager",
        "Password: {wifi_password}",
    ],
)
def test_ordinary_text_is_not_flagged(text):
    assert lint_text(text) == []


def test_check_of_a_missing_directory_is_a_usage_error(tmp_path):
    result = check(Path(tmp_path / "nowhere"))
    assert result.exit_code == 2
