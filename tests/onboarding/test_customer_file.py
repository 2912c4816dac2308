"""The customer file: ${ENV} secrets, clear errors naming the field, secrets never shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from pmsgate.onboarding.customer_file import (
    InvalidCustomerFile,
    load_customer_file,
    parse_customer_file,
)
from pmsgate.sandbox.app import Sandbox
from tests.onboarding.sandbox_customer import customer_document

EXAMPLE = Path(__file__).parent.parent.parent / "docs" / "examples" / "customer.yaml"


def seeded(index: int = 1, **changes: Any) -> tuple[dict[str, Any], dict[str, str]]:
    sandbox = Sandbox(seed=7)
    facility = sandbox.kross.facility_summaries()[index]
    notes = next(w for w in sandbox.notion.workspaces() if w["hotel_id"] == facility["hotel_id"])
    return customer_document(facility, notes, **changes)


def invalid(document: dict[str, Any], env: dict[str, str]) -> InvalidCustomerFile:
    with pytest.raises(InvalidCustomerFile) as caught:
        parse_customer_file(document, env=env)
    assert caught.value.code == "invalid_customer_file"
    return caught.value


def test_secrets_written_as_env_references_are_resolved_and_kept_hidden():
    document, env = seeded()
    file = parse_customer_file(document, env=env)
    password = env[f"KROSS_PASSWORD_{file.booking_system.hotel_id}"]
    assert file.booking_system.password.get_secret_value() == password
    assert file.notes.token.get_secret_value() == next(v for k, v in env.items() if "NOTION" in k)
    shown = repr(file) + str(file) + file.model_dump_json()
    for secret in env.values():
        assert secret not in shown


def test_any_value_may_come_from_the_environment():
    document, env = seeded()
    document["booking_system"]["hotel_id"] = "${HOTEL_ID}"
    file = parse_customer_file(document, env={**env, "HOTEL_ID": "999001"})
    assert file.booking_system.hotel_id == "999001"
    assert "booking_system.hotel_id" in invalid(document, env).message


def test_an_unset_env_reference_names_the_field_and_the_variable():
    document, env = seeded()
    del env[next(k for k in env if k.startswith("KROSS_PASSWORD"))]
    error = invalid(document, env)
    assert "booking_system.password" in error.message
    assert "KROSS_PASSWORD_" in error.message


def test_an_inline_secret_is_accepted_with_a_warning_that_names_only_the_field():
    document, env = seeded()
    document["booking_system"]["password"] = "inline-password-123"
    with capture_logs() as logs:
        file = parse_customer_file(document, env=env)
    assert file.booking_system.password.get_secret_value() == "inline-password-123"
    warning = next(e for e in logs if e["event"] == "customer_file_inline_secrets")
    assert warning["fields"] == ["booking_system.password"]
    assert "inline-password-123" not in repr(logs)


def test_an_unknown_field_is_refused_by_name():
    document, env = seeded()
    document["workspace"]["plan_limit"] = 10
    error = invalid(document, env)
    assert "workspace.plan_limit" in error.message


def test_a_wrong_value_is_reported_without_echoing_it():
    document, env = seeded()
    document["booking_system"]["password"] = ["not-a-string-secret-xyz"]
    document["email"] = "not-an-address"
    error = invalid(document, env)
    assert "booking_system.password" in error.message and "email" in error.message
    assert "not-a-string-secret-xyz" not in str(error) + repr(error)


def test_an_own_customer_needs_its_api_key_and_a_partner_must_not_give_one():
    own, env = seeded(index=0)
    assert own["kind"] == "own"
    del own["booking_system"]["api_key"]
    assert "api_key" in invalid(own, env).message
    partner, env = seeded(index=1)
    partner["booking_system"]["api_key"] = "0" * 32
    assert "api_key" in invalid(partner, env).message


def test_the_voice_agent_speaks_one_language_never_multilingual():
    for language in ("multilingual", "it, en", "auto"):
        document, env = seeded(channels__voice_agent={"language": language})
        assert "channels.voice_agent.language" in invalid(document, env).message


def test_wifi_credentials_name_exactly_one_apartment():
    document, env = seeded(
        wifi=[{"network": "Net", "wifi_password": "${WIFI}", "room_type_id": "1", "page_id": "p"}]
    )
    assert "wifi.0" in invalid(document, {**env, "WIFI": "secret-wifi"}).message
    document, env = seeded(wifi=[{"network": "Net", "wifi_password": "${WIFI}", "page_id": "p"}])
    file = parse_customer_file(document, env={**env, "WIFI": "secret-wifi"})
    found = file.wifi_for(page_id="p")
    assert found is not None and found.wifi_password.get_secret_value() == "secret-wifi"


def test_a_assistant_admin_and_the_onboarding_message_links_are_required():
    document, env = seeded(platform_admins=[])
    assert "platform_admins" in invalid(document, env).message
    document, env = seeded()
    del document["onboarding_message"]["demo_call_url"]
    assert "onboarding_message.demo_call_url" in invalid(document, env).message


def test_a_file_that_is_not_yaml_or_missing_is_a_clear_error(tmp_path: Path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("student_id: [unclosed\n", encoding="utf-8")
    with pytest.raises(InvalidCustomerFile, match="not valid YAML at line"):
        load_customer_file(broken)
    with pytest.raises(InvalidCustomerFile, match="Cannot read"):
        load_customer_file(tmp_path / "absent.yaml")


def test_the_documented_example_is_a_valid_customer_file():
    env = {
        "LAKESIDE_KROSS_PASSWORD": "pw-lakeside",
        "LAKESIDE_NOTION_TOKEN": "ntn_lakeside",
        "LAKESIDE_WIFI_101": "wifi-101",
        "LAKESIDE_WIFI_GARDEN": "wifi-garden",
    }
    file = load_customer_file(EXAMPLE, env=env)
    assert file.kind == "partner" and file.booking_system.hotel_id == "258176"
    assert file.channels.voice_agent is not None and file.channels.voice_agent.language == "it"
    assert file.recipient == "owner@lakeside-apartments.example"
