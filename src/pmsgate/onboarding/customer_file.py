"""The customer file: everything onboarding needs about one customer, in one YAML document.

The format is documented with a full example in ``docs/onboarding.md`` (and
``docs/examples/customer.yaml``). Secrets (passwords, api keys, tokens, WiFi
passwords) are written as ``${ENV_VAR}`` references resolved from the environment
at load time; an inline secret is accepted with a warning. Every secret is held as
a :class:`~pydantic.SecretStr`, and errors name the field, never its value
(code ``invalid_customer_file``). Any other value may be a ``${ENV_VAR}`` too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import structlog
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pmsgate.errors import InvalidInput
from pmsgate.i18n import is_timezone
from pmsgate.storage.models import SubscriptionStatus

log = structlog.get_logger(__name__)

_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_ANY_REFERENCE = re.compile(r"\$\{[^}]*\}")
# Where secrets live in the document: (section path, key). A path element ``*`` is a list.
_SECRET_KEYS = frozenset({"password", "api_key", "token", "wifi_password"})


class InvalidCustomerFile(InvalidInput):
    """The customer file cannot be read, parsed or validated (the field is named)."""

    code = "invalid_customer_file"
    hint = "Correct the customer file (format: docs/onboarding.md) and run again."


class _Strict(BaseModel):
    # Inputs are never echoed in validation errors: some of them are secrets.
    model_config = ConfigDict(
        extra="forbid", frozen=True, hide_input_in_errors=True, coerce_numbers_to_str=True
    )


class Contract(_Strict):
    """The signed contract: its reference and the price the subscription must be on."""

    ref: str = Field(min_length=1, max_length=100)
    price_id: str = Field(min_length=1, max_length=100)
    signed_on: date | None = None


class SubscriptionInfo(_Strict):
    """The subscription as billing reports it."""

    id: str | None = Field(default=None, max_length=100)
    status: SubscriptionStatus | None = None
    price_id: str | None = Field(default=None, max_length=100)


class Autonomy(_Strict):
    """What the customer handles autonomously (adds ``payment-link-generator``)."""

    handles_upsell: bool = False
    handles_late_check_in: bool = False


class WorkspaceInfo(_Strict):
    """The assistant-platform workspace and its budget."""

    name: str | None = Field(default=None, max_length=200)
    slug: str | None = Field(default=None, max_length=100)
    plan_limit_usd: Decimal = Field(ge=0)
    alert_threshold_pct: int = Field(default=80, ge=1, le=100)
    notes: str = ""


class BookingSystem(_Strict):
    """The booking-system (kross) facility and its API user."""

    hotel_id: str = Field(min_length=1, max_length=32)
    username: str = Field(min_length=1, max_length=100)
    password: SecretStr
    api_key: SecretStr | None = None  # own facilities only
    # The PMS integration row id (``int-…``) when it already exists; Route B's
    # provisioning takes this id, never the student_id.
    integration_id: str | None = Field(default=None, max_length=64)
    name: str = ""


class NotionInfo(_Strict):
    """The customer's notes workspace: the integration token and its apartments database."""

    token: SecretStr
    apartments_database_id: str = Field(min_length=1, max_length=100)
    workspace_id: str | None = Field(default=None, max_length=100)


class WifiCredentials(_Strict):
    """One apartment's WiFi, by booking-system room type id or notes page id (step 13)."""

    room_type_id: str | None = None
    page_id: str | None = None
    network: str = Field(min_length=1, max_length=100)
    wifi_password: SecretStr

    @field_validator("room_type_id", "page_id")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @model_validator(mode="after")
    def _one_key(self) -> WifiCredentials:
        # Exactly one of the two says which apartment the credentials belong to.
        if (self.room_type_id is None) == (self.page_id is None):
            raise ValueError("give exactly one of room_type_id or page_id")
        return self


class VoiceAgent(_Strict):
    """The voice agent: one specific language (never multilingual), fixed number, forwarding."""

    language: str = Field(min_length=2, max_length=35)
    fixed_number: str | None = None
    forwarding_from: str | None = None  # the customer's local number forwarded to it

    @field_validator("language")
    @classmethod
    def _one_language(cls, value: str) -> str:
        text = value.strip()
        if text.lower() in {"multi", "multilingual", "auto", "any", "original"} or any(
            sep in text for sep in (",", "/", "+", " ")
        ):
            raise ValueError("the voice agent speaks ONE specific language (e.g. `it`)")
        return text


class Channels(_Strict):
    """The guest channels a person sets up (step 15)."""

    whatsapp_number: bool = True  # request a WhatsApp number (2-10 days lead time)
    whatsapp_requested_on: date | None = None
    voice_agent: VoiceAgent | None = None


class OnboardingMessage(_Strict):
    """Who gets the onboarding message and what it links to (step 16)."""

    to: str | None = Field(default=None, max_length=320)  # the customer's e-mail by default
    # Only when the console's address (PMSGATE_PUBLIC_URL) is not configured: the message
    # links the console's own sign-in page otherwise.
    login_url: str | None = Field(default=None, min_length=8, max_length=500)
    demo_call_url: str = Field(min_length=8, max_length=500)  # booking a 15-minute demo call

    @field_validator("to")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.strip()
        if "@" not in text or text.startswith("@") or text.endswith("@"):
            raise ValueError("must be an e-mail address")
        return text

    @field_validator("login_url", "demo_call_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.strip()
        if not text.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL")
        return text


def _is_email(text: str) -> bool:
    return "@" in text and not text.startswith("@") and not text.endswith("@")


# The text fields of a customer file: the rule each holds once stripped, and what it says when
# it does not.
_TEXT_RULES: dict[str, tuple[Callable[[str], bool], str]] = {
    "student_id": (bool, "must not be blank"),
    "name": (bool, "must not be blank"),
    "email": (_is_email, "must be an e-mail address"),
    "timezone": (is_timezone, "must be an IANA time zone name such as Europe/Rome"),
}


class CustomerFile(_Strict):
    """One customer's onboarding input (see ``docs/onboarding.md``)."""

    student_id: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=200)
    email: str = Field(min_length=3, max_length=320)
    kind: Literal["partner", "own"]
    # What the customer reads is written in this language (the onboarding message, step 16).
    # Italian by default: the operators work in Italian (step 7's escalation guardrail).
    language: Literal["it", "en"] = "it"
    # The time zone the customer reads times in: console pages and e-mails (IANA name).
    timezone: str = Field(default="Europe/Rome", min_length=1, max_length=64)
    contract: Contract
    subscription: SubscriptionInfo = Field(default_factory=SubscriptionInfo)
    autonomy: Autonomy = Field(default_factory=Autonomy)
    workspace: WorkspaceInfo
    booking_system: BookingSystem
    notes: NotionInfo
    wifi: list[WifiCredentials] = Field(default_factory=list)
    platform_admins: list[str] = Field(min_length=1)  # platform-team members made Admin
    channels: Channels = Field(default_factory=Channels)
    onboarding_message: OnboardingMessage

    @field_validator(*_TEXT_RULES)
    @classmethod
    def _text(cls, value: str, info: ValidationInfo) -> str:
        """The field's text without surrounding blanks, if its rule holds."""
        text = value.strip()
        holds, problem = _TEXT_RULES[info.field_name or ""]
        if not holds(text):
            raise ValueError(problem)
        return text

    @field_validator("platform_admins")
    @classmethod
    def _admins(cls, value: list[str]) -> list[str]:
        out = [item.strip().lower() for item in value]
        if any("@" not in item for item in out):
            raise ValueError("each platform admin must be an e-mail address")
        return out

    @model_validator(mode="after")
    def _own_api_key(self) -> CustomerFile:
        # An own facility brings its api key; a partner one uses the gateway's shared key.
        if self.kind == "own" and self.booking_system.api_key is None:
            raise ValueError("booking_system.api_key is required for an `own` customer")
        if self.kind == "partner" and self.booking_system.api_key is not None:
            raise ValueError("booking_system.api_key is only for `own` customers")
        return self

    @property
    def recipient(self) -> str:
        """Who gets the onboarding message (the customer's e-mail by default)."""
        return self.onboarding_message.to or self.email

    def wifi_for(
        self, *, room_type_id: str | None = None, page_id: str | None = None
    ) -> WifiCredentials | None:
        """The WiFi credentials the file gives for an apartment, by room type or page id."""
        for item in self.wifi:
            if room_type_id is not None and item.room_type_id == str(room_type_id):
                return item
            if page_id is not None and item.page_id == page_id:
                return item
        return None


# --- loading -----------------------------------------------------------------------------------


def _resolve(
    node: Any, path: str, env: Mapping[str, str], inline: list[str], missing: list[str]
) -> Any:
    """Resolve ``${ENV}`` references; note inline secrets and unresolvable references."""
    if isinstance(node, str) and (match := _REFERENCE.match(node.strip())):
        # Any value may come from the environment; only secrets must.
        resolved = env.get(match.group(1))
        if resolved is None:
            missing.append(f"{path} (environment variable {match.group(1)} is not set)")
            return node
        return resolved
    if isinstance(node, dict):
        return {
            key: _resolve_value(
                key, value, f"{path}.{key}" if path else str(key), env, inline, missing
            )
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_resolve(item, f"{path}[{i}]", env, inline, missing) for i, item in enumerate(node)]
    return node


def _resolve_value(
    key: Any, value: Any, path: str, env: Mapping[str, str], inline: list[str], missing: list[str]
) -> Any:
    if key not in _SECRET_KEYS or not isinstance(value, str | int):
        return _resolve(value, path, env, inline, missing)
    text = str(value).strip()
    match = _REFERENCE.match(text)
    if match is None:
        if _ANY_REFERENCE.search(text):
            missing.append(f"{path} (malformed reference; write `${{ENV_VAR}}`)")
            return ""
        inline.append(path)
        return text
    name = match.group(1)
    resolved = env.get(name)
    if resolved is None or not resolved.strip():
        missing.append(f"{path} (environment variable {name} is not set)")
        return ""
    return resolved


def _field_errors(error: ValidationError) -> list[str]:
    out = []
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "(document)"
        message = str(item["msg"]).removeprefix("Value error, ")
        out.append(f"{where}: {message}")
    return out


def parse_customer_file(
    data: Any, *, env: Mapping[str, str] | None = None, source: str = "customer file"
) -> CustomerFile:
    """Validate a parsed document (secrets resolved from ``env``); InvalidCustomerFile on error."""
    if not isinstance(data, dict):
        raise InvalidCustomerFile(f"The {source} must be a YAML mapping (key: value).")
    inline: list[str] = []
    missing: list[str] = []
    resolved = _resolve(data, "", os.environ if env is None else env, inline, missing)
    if missing:
        raise InvalidCustomerFile(
            f"The {source} references secrets that cannot be resolved: " + "; ".join(missing),
            hint="Export the environment variables the file names, then run again.",
        )
    try:
        parsed = CustomerFile.model_validate(resolved)
    except ValidationError as error:
        raise InvalidCustomerFile(
            f"The {source} is invalid: " + "; ".join(_field_errors(error))
        ) from None
    if inline:
        # The paths only, never the values: the warning tells where to move them.
        log.warning(
            "customer_file_inline_secrets",
            student_id=parsed.student_id,
            fields=inline,
            hint="write secrets as ${ENV_VAR} references",
        )
    return parsed


def load_customer_file(path: Path | str, *, env: Mapping[str, str] | None = None) -> CustomerFile:
    """Read, resolve and validate a customer file; InvalidCustomerFile naming the field."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise InvalidCustomerFile(
            f"Cannot read the customer file {file}: {error.strerror or error}.",
            hint="Give the path of an existing customer file (YAML).",
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InvalidCustomerFile(f"The customer file {file} is not valid YAML{where}.") from None
    return parse_customer_file(data, env=env, source=f"customer file {file.name}")
