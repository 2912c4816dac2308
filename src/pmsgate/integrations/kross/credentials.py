"""Booking-system credentials: the body of ``auth/get-token`` (docs/requirements.md R2).

Each rule has its own error code so that a caller (onboarding, the reconnect
form) can say exactly what is wrong. Messages never repeat the password or the
api key, and never repeat the username either (an e-mail there is personal data).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr, model_validator

from pmsgate.boundary import (
    API_KEY_PATTERN,
    API_USER_PATTERN,
    HOTEL_ID_PATTERN,
    MAX_API_PASSWORD,
    has_control_characters,
)
from pmsgate.errors import InvalidInput

_HOTEL_ID_RE = re.compile(HOTEL_ID_PATTERN)
_USERNAME_RE = re.compile(API_USER_PATTERN)
_API_KEY_RE = re.compile(API_KEY_PATTERN)
MAX_PASSWORD = MAX_API_PASSWORD

_API_USER_HINT = (
    "Use the API user of the facility (format apiNNNNN), shown in the booking-system panel "
    "under Settings → API; it differs from the web-portal login."
)


class InvalidCredentials(InvalidInput):
    """A token-request field breaks a rule of docs/requirements.md R2; ``field`` names which."""

    code = "invalid_credentials"

    def __init__(self, field: str, code: str, message: str, hint: str) -> None:
        super().__init__(message, code=code, hint=hint)
        self.field = field


def _text(value: Any) -> str:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if value is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        # Refuse other types without echoing them: they might be a secret in the wrong slot.
        raise TypeError("credential fields must be strings")
    return value


def credential_problems(
    hotel_id: Any, username: Any, password: Any, api_key: Any
) -> list[InvalidCredentials]:
    """Every rule of docs/requirements.md R2 the values break, in field order (empty when valid)."""
    problems: list[InvalidCredentials] = []
    hotel = _text(hotel_id).strip()
    if not _HOTEL_ID_RE.match(hotel):
        problems.append(
            InvalidCredentials(
                "hotel_id",
                "invalid_hotel_id",
                "hotel_id must be the numeric identifier of the facility.",
                "Copy the facility's numeric hotel id from the booking-system panel.",
            )
        )
    user = _text(username).strip()
    if "@" in user:
        problems.append(
            InvalidCredentials(
                "username",
                "username_is_email",
                "username is an e-mail address, but the booking system expects the API user.",
                _API_USER_HINT,
            )
        )
    elif not _USERNAME_RE.match(user):
        problems.append(
            InvalidCredentials(
                "username",
                "invalid_username",
                "username must be 'api' followed by digits (apiNNNNN).",
                _API_USER_HINT,
            )
        )
    secret = _text(password)
    if not secret.strip():
        problems.append(
            InvalidCredentials(
                "password",
                "missing_password",
                "password is required.",
                "Give the password of the API user (not of the web-portal login).",
            )
        )
    elif len(secret) > MAX_PASSWORD:
        problems.append(
            InvalidCredentials(
                "password",
                "password_too_long",
                f"password is longer than {MAX_PASSWORD} characters.",
                "Give the password of the API user exactly as set in the booking-system panel.",
            )
        )
    elif has_control_characters(secret):
        # NUL and friends are no one's password; PostgreSQL and JSON tooling choke on them.
        problems.append(
            InvalidCredentials(
                "password",
                "invalid_password",
                "password contains a control character.",
                "Type the password again without control characters (copying may add some).",
            )
        )
    if not _API_KEY_RE.match(_text(api_key).strip()):
        problems.append(
            InvalidCredentials(
                "api_key",
                "invalid_api_key",
                "api_key must be exactly 32 hexadecimal characters.",
                "Copy the api key from the booking-system panel under Settings → API; partner "
                "facilities use the gateway's shared key.",
            )
        )
    return problems


class Credentials(BaseModel):
    """A valid token request; the password and api key stay hidden in repr, str and dumps."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    hotel_id: str
    username: str
    password: SecretStr
    api_key: SecretStr

    @model_validator(mode="before")
    @classmethod
    def _check_rules(cls, data: Any) -> Any:
        # Raising our own error (not ValueError) lets pydantic pass it through unchanged,
        # so every construction path reports the codes of docs/requirements.md R2.
        if not isinstance(data, dict):
            return data
        try:
            problems = credential_problems(
                data.get("hotel_id"),
                data.get("username"),
                data.get("password"),
                data.get("api_key"),
            )
        except TypeError:
            raise InvalidCredentials(
                "credentials",
                "invalid_credentials",
                "Every credential field must be a string.",
                "Send hotel_id, username, password and api_key as strings.",
            ) from None
        if problems:
            raise problems[0]
        return {
            **data,
            "hotel_id": _text(data["hotel_id"]).strip(),
            "username": _text(data["username"]).strip(),
            "api_key": _text(data["api_key"]).strip(),
        }

    def token_request_body(self) -> dict[str, str]:
        """The plaintext ``auth/get-token`` body; only the client should call this."""
        return {
            "api_key": self.api_key.get_secret_value(),
            "hotel_id": self.hotel_id,
            "username": self.username,
            "password": self.password.get_secret_value(),
        }
