"""The emulator's validation: each field checked as the platform does, refused with a 422."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pmsgate.sandbox.assistant import errors
from pmsgate.sandbox.assistant.errors import AssistantApiError

MAX_NAME = 64
KEBAB_CASE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
LANGUAGES = ("python", "javascript")
PARAMETER_TYPES = ("string", "number", "integer", "boolean", "array", "object")
PARAMETER_KEYS = frozenset({"type", "required", "description", "format", "enum"})
OPERATION_MODES = ("copilot", "autopilot")
ROLES: dict[str, str] = {
    "Owner": "Everything, including billing and deleting the workspace.",
    "Admin": "Manages members, tools, skills, agents, knowledge and secrets.",
    "Editor": "Edits tools, skills, agents and knowledge.",
    "Viewer": "Reads everything, changes nothing.",
}
MAX_SECRET_VALUE = 4096
MAX_TITLE = 255
MAX_BODY = 100_000

# The exact validation message the platform answers (docs/assistant-api.md).
PARAMETER_DESCRIPTION_REQUIRED = "parameters[].description required"


def choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise AssistantApiError(errors.VALIDATION, f"{name} must be one of {', '.join(allowed)}")
    return value


def required_text(field_name: str, value: Any, max_length: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AssistantApiError(errors.VALIDATION, f"{field_name} required")
    if len(value) > max_length:
        raise AssistantApiError(
            errors.VALIDATION, f"{field_name} must be at most {max_length} characters"
        )
    return value


def check_name(field_name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise AssistantApiError(errors.VALIDATION, f"{field_name} required")
    if len(value) > MAX_NAME or not KEBAB_CASE.match(value):
        raise AssistantApiError(
            errors.VALIDATION,
            f"{field_name} must be kebab-case (lowercase letters, digits, single hyphens), "
            f"at most {MAX_NAME} characters",
        )
    return value


def check_language(value: Any) -> str:
    if value not in LANGUAGES:
        raise AssistantApiError(errors.VALIDATION, "language must be python or javascript")
    return str(value)


def check_parameters(parameters: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(parameters, Mapping):
        raise AssistantApiError(errors.VALIDATION, "parameters must be an object")
    checked: dict[str, dict[str, Any]] = {}
    for name, spec in parameters.items():
        if not PARAMETER_NAME.match(name):
            raise AssistantApiError(
                errors.VALIDATION,
                f"parameters: '{name}' must be letters, digits and underscores",
            )
        if not isinstance(spec, Mapping):
            raise AssistantApiError(errors.VALIDATION, f"parameters.{name} must be an object")
        description = spec.get("description")
        if not isinstance(description, str) or not description.strip():
            raise AssistantApiError(errors.VALIDATION, PARAMETER_DESCRIPTION_REQUIRED)
        if spec.get("type") not in PARAMETER_TYPES:
            raise AssistantApiError(
                errors.VALIDATION,
                f"parameters[].type must be one of {', '.join(PARAMETER_TYPES)}",
            )
        if not isinstance(spec.get("required", False), bool):
            raise AssistantApiError(errors.VALIDATION, "parameters[].required must be a boolean")
        unknown = sorted(set(spec) - PARAMETER_KEYS)
        if unknown:
            raise AssistantApiError(
                errors.VALIDATION, f"parameters.{name}: unknown field '{unknown[0]}'"
            )
        checked[name] = {"required": False, **copy.deepcopy(dict(spec))}
    return checked


def check_arguments(parameters: Mapping[str, Mapping[str, Any]], given: Mapping[str, Any]) -> None:
    unknown = sorted(set(given) - set(parameters))
    if unknown:
        raise AssistantApiError(errors.VALIDATION, f"parameters: unknown parameter '{unknown[0]}'")
    for name, spec in parameters.items():
        if name not in given:
            if spec.get("required"):
                raise AssistantApiError(errors.VALIDATION, f"parameters.{name} required")
            continue
        if not _fits(spec.get("type"), given[name]):
            raise AssistantApiError(
                errors.VALIDATION, f"parameters.{name} must be of type {spec.get('type')}"
            )


def _fits(kind: Any, value: Any) -> bool:
    if value is None:
        return True
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    checks: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "integer": int,
        "number": (int, float),
        "array": list,
        "object": dict,
    }
    expected = checks.get(str(kind))
    return expected is None or isinstance(value, expected)


def check_role(role: Any) -> None:
    if role not in ROLES:
        raise AssistantApiError(errors.VALIDATION, f"role must be one of {', '.join(ROLES)}")


def check_operation_mode(value: Any) -> str:
    if value not in OPERATION_MODES:
        raise AssistantApiError(errors.VALIDATION, "operation_mode must be copilot or autopilot")
    return str(value)


def check_guardrails(guardrails: Any) -> list[dict[str, str]]:
    checked: list[dict[str, str]] = []
    for guardrail in guardrails:
        if not isinstance(guardrail, Mapping):
            raise AssistantApiError(errors.VALIDATION, "guardrails[] must be objects")
        for key in ("title", "knowledge"):
            value = guardrail.get(key)
            if not isinstance(value, str) or not value.strip():
                raise AssistantApiError(errors.VALIDATION, f"guardrails[].{key} required")
        unknown = sorted(set(guardrail) - {"title", "knowledge"})
        if unknown:
            raise AssistantApiError(
                errors.VALIDATION, f"guardrails[]: unknown field '{unknown[0]}'"
            )
        checked.append({"title": guardrail["title"], "knowledge": guardrail["knowledge"]})
    return checked


def check_triggers(triggers: Any) -> list[dict[str, Any]]:
    checked: list[dict[str, Any]] = []
    for trigger in triggers:
        if not isinstance(trigger, Mapping):
            raise AssistantApiError(errors.VALIDATION, "triggers[] must be objects")
        required_text("triggers[].name", trigger.get("name"), 200)
        if trigger.get("type") != "message":
            raise AssistantApiError(errors.VALIDATION, "triggers[].type must be message")
        config = trigger.get("config")
        if not isinstance(config, Mapping) or not isinstance(config.get("inboxTypeId"), str):
            raise AssistantApiError(errors.VALIDATION, "triggers[].config.inboxTypeId required")
        channels = config.get("channels", [])
        if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
            raise AssistantApiError(
                errors.VALIDATION, "triggers[].config.channels must be a list of strings"
            )
        enabled = trigger.get("enabled", True)
        if not isinstance(enabled, bool):
            raise AssistantApiError(errors.VALIDATION, "triggers[].enabled must be a boolean")
        checked.append(
            {
                "name": trigger["name"],
                "type": "message",
                "config": copy.deepcopy(dict(config)),
                "enabled": enabled,
            }
        )
    return checked


def check_body(value: Any) -> str:
    if not isinstance(value, str):
        raise AssistantApiError(errors.VALIDATION, "body must be a string")
    if len(value) > MAX_BODY:
        raise AssistantApiError(errors.VALIDATION, f"body must be at most {MAX_BODY} characters")
    return value


def check_entity_ids(value: Any) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise AssistantApiError(errors.VALIDATION, "entity_ids must be a list of listing ids")
    return list(dict.fromkeys(value))
