"""Deterministic seed data of the platform emulator: the account token and one existing customer.

The seeded workspace stands for "another customer" already on the platform: it
has its own tool and skill, so tests can show that onboarding provisions from the
catalogue and never copies from someone else's workspace. Everything is added
through the store's own methods (``AssistantStore.reset``), so the seed obeys the same
validation as requests; this module is the data only.
"""

from __future__ import annotations

from typing import Any

# The account (organisation-wide) token of the sandbox; a sandbox value, not a real one.
SANDBOX_ASSISTANT_TOKEN = "sbx-platform-7f3a9c2e5b8d4016a1c7e9f2"
ACCOUNT_OWNER_EMAIL = "owner@example.com"
ACCOUNT_OWNER_NAME = "Sandbox Account Owner"

EXISTING_WORKSPACE_NAME = "Sandbox Existing Customer"
EXISTING_WORKSPACE_SLUG = "sandbox-existing-customer"

_EXISTING_TOOL_CODE = '''\
def main(**params):
    """Greets; belongs to another customer and must never be copied."""
    return {"message": "hello from the existing customer", "rawData": {"params": params}}
'''


# The existing customer's own tool and skill, as the store's create calls take them.
EXISTING_TOOL: dict[str, Any] = {
    "name": "existing-customer-greeting",
    "description": "Greets the guest; a tool of another customer, not part of the catalogue.",
    "language": "python",
    "code": _EXISTING_TOOL_CODE,
    "parameters": {
        "guest_name": {
            "type": "string",
            "required": False,
            "description": "How the guest wants to be called, as written by the guest.",
        }
    },
    "execution_message_description": "Greeting the guest",
    "enable_globally": False,
}
EXISTING_SKILL: dict[str, Any] = {
    "name": "existing-customer-skill",
    "display_name": "Existing customer skill",
    "description": "A skill of another customer.",
    "body": "Answer politely.",
    "allowed_tools": ["existing-customer-greeting"],
    "tags": ["seed"],
    "enabled": True,
}
