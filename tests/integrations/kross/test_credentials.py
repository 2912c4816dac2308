"""Token-request validation (spec §2.1): one code per rule, secrets never shown."""

from __future__ import annotations

import pytest

from pmsgate.errors import InvalidInput
from pmsgate.integrations.kross.credentials import (
    Credentials,
    InvalidCredentials,
    credential_problems,
)

PASSWORD = "s3cret-Pa55word!"
API_KEY = "0123456789abcdef0123456789ABCDEF"
VALID = {"hotel_id": "123456", "username": "api12345", "password": PASSWORD, "api_key": API_KEY}


def _code(**changes: object) -> str:
    with pytest.raises(InvalidCredentials) as caught:
        Credentials(**{**VALID, **changes})
    return caught.value.code


def test_valid_credentials_are_accepted_and_normalised() -> None:
    creds = Credentials(hotel_id=123456, username=" api12345 ", password=PASSWORD, api_key=API_KEY)
    assert creds.hotel_id == "123456"
    assert creds.username == "api12345"
    assert creds.token_request_body() == {**VALID}


@pytest.mark.parametrize("hotel_id", ["", "abc", "12a45", "-1", "1.5", None])
def test_a_non_numeric_hotel_id_is_invalid_hotel_id(hotel_id: object) -> None:
    assert _code(hotel_id=hotel_id) == "invalid_hotel_id"


@pytest.mark.parametrize("username", ["", "api", "API12345", "user12345", "api12a", "12345"])
def test_a_username_not_api_followed_by_digits_is_invalid_username(username: str) -> None:
    assert _code(username=username) == "invalid_username"


def test_an_email_username_gets_its_own_code_and_the_api_user_hint() -> None:
    with pytest.raises(InvalidCredentials) as caught:
        Credentials(**{**VALID, "username": "owner@example.com"})
    assert caught.value.code == "username_is_email"
    assert "apiNNNNN" in caught.value.hint
    assert "owner@example.com" not in str(caught.value)


@pytest.mark.parametrize(
    "api_key",
    [
        "",
        "0123456789abcdef",
        "0123456789abcdef0123456789abcdef0",
        "g" * 32,
        "0123-56789abcdef0123456789abcde",
    ],
)
def test_an_api_key_that_is_not_32_hex_characters_is_invalid_api_key(api_key: str) -> None:
    assert _code(api_key=api_key) == "invalid_api_key"


@pytest.mark.parametrize("password", ["", "   ", None])
def test_an_empty_password_is_missing_password(password: object) -> None:
    assert _code(password=password) == "missing_password"


def test_validation_errors_are_invalid_input_with_status_422() -> None:
    with pytest.raises(InvalidInput) as caught:
        Credentials(**{**VALID, "hotel_id": "x"})
    assert caught.value.status == 422
    assert caught.value.to_body()["error"]["code"] == "invalid_hotel_id"


def test_every_broken_rule_is_reported_in_field_order() -> None:
    problems = credential_problems("x", "me@example.com", "", "nope")
    assert [p.code for p in problems] == [
        "invalid_hotel_id",
        "username_is_email",
        "missing_password",
        "invalid_api_key",
    ]
    assert [p.field for p in problems] == ["hotel_id", "username", "password", "api_key"]


def test_password_and_api_key_never_appear_in_repr_str_or_dumps() -> None:
    creds = Credentials(**VALID)
    shown = [repr(creds), str(creds), str(creds.model_dump()), creds.model_dump_json()]
    for text in shown:
        assert PASSWORD not in text
        assert API_KEY not in text


def test_a_wrong_api_key_error_does_not_echo_the_key_or_the_password() -> None:
    bad_key = "z" * 32
    with pytest.raises(InvalidCredentials) as caught:
        Credentials(**{**VALID, "api_key": bad_key})
    rendered = f"{caught.value!s} {caught.value!r} {caught.value.to_body()}"
    assert bad_key not in rendered
    assert PASSWORD not in rendered


def test_a_secret_in_a_non_string_field_is_refused_without_echoing_it() -> None:
    with pytest.raises(InvalidCredentials) as caught:
        Credentials(**{**VALID, "password": ["hunter2"]})
    assert caught.value.code == "invalid_credentials"
    assert "hunter2" not in str(caught.value)


def test_credentials_are_immutable() -> None:
    creds = Credentials(**VALID)
    with pytest.raises(Exception):  # noqa: B017
        creds.hotel_id = "999"
