"""What an audit event says: who acted (:class:`Actor`), what they did (:class:`AuditAction`),
how it ended (:class:`Outcome`). The one place these names are defined."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, get_args

ActorKind = Literal["admin", "customer_user", "gateway_key", "cli", "job", "system"]
ACTOR_KINDS: tuple[str, ...] = get_args(ActorKind)
MAX_ACTOR = 200


class AuditAction(StrEnum):
    """Every action the trail records; dotted, so a prefix (``key.``) selects a family."""

    KEY_MINTED = "key.minted"
    KEY_REVOKED = "key.revoked"
    KEY_EXPIRED = "key.expired"
    KEY_USED_FOR_WRITE = "key.used_for_write"
    KEY_SCOPES_CHANGED = "key.scopes_changed"
    KEY_ROTATED = "key.rotated"
    CREDENTIALS_STORED = "credentials.stored"
    CREDENTIALS_CHANGED = "credentials.changed"
    CREDENTIALS_RECONNECTED = "credentials.reconnected"
    FACILITY_STATUS_CHANGED = "facility.status_changed"
    SIGNIN_SUCCEEDED = "signin.succeeded"
    SIGNIN_FAILED = "signin.failed"
    SIGNIN_LINK_USED = "signin.link_used"
    SIGNIN_LOCKED = "signin.locked"
    SIGNIN_UNLOCKED = "signin.unlocked"
    ONBOARDING_STEP_CONFIRMED = "onboarding.step_confirmed"
    ONBOARDING_STEP_REOPENED = "onboarding.step_reopened"
    ACCOUNT_INVITED = "account.invited"
    PASSWORD_RESET_SENT = "account.reset_sent"
    PASSWORD_RESET_REQUESTED = "account.reset_requested"
    PASSWORD_SET = "account.password_set"
    ADMIN_ACTION = "admin.action"
    CONSOLE_ACTION = "console.action"
    ONBOARDING_SIDE_EFFECT = "onboarding.side_effect"
    REGISTRY_FIXED = "registry.fixed"
    NOTICE_SENT = "notice.sent"
    NOTICE_FAILED = "notice.failed"
    AUDIT_PURGED = "audit.purged"
    INCIDENT_OPENED = "incident.opened"
    INCIDENT_RESOLVED = "incident.resolved"
    INCIDENT_ACKNOWLEDGED = "incident.acknowledged"
    INCIDENT_ASSIGNED = "incident.assigned"
    INCIDENT_SNOOZED = "incident.snoozed"
    INCIDENT_NOTE_ADDED = "incident.note_added"
    INCIDENT_CHECKED = "incident.checked"
    INCIDENT_LINK_RESENT = "incident.link_resent"
    WEBHOOK_SUBSCRIBED = "webhook.subscribed"
    WEBHOOK_REMOVED = "webhook.removed"
    WEBHOOK_ENABLED = "webhook.enabled"
    WEBHOOK_ROTATED = "webhook.rotated"
    WEBHOOK_REPLAYED = "webhook.replayed"
    WEBHOOK_DISABLED = "webhook.disabled"
    WEBHOOK_GAVE_UP = "webhook.gave_up"
    OAUTH_CLIENT_REGISTERED = "oauth.client_registered"
    OAUTH_GRANTED = "oauth.granted"
    OAUTH_DENIED = "oauth.denied"
    OAUTH_REFRESH_REUSED = "oauth.refresh_reused"
    OAUTH_CODE_REUSED = "oauth.code_reused"
    OAUTH_REVOKED = "oauth.revoked"


class Outcome(StrEnum):
    """How the action ended: ``unknown`` when a write was sent and no answer came back."""

    SUCCESS = "success"
    FAILURE = "failure"
    REFUSED = "refused"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Actor:
    """Who acted: its kind and a name that identifies it without being a secret."""

    kind: ActorKind
    name: str

    def __post_init__(self) -> None:
        if self.kind not in ACTOR_KINDS:
            raise ValueError(f"unknown actor kind {self.kind!r}")
        if not self.name or len(self.name) > MAX_ACTOR:
            raise ValueError("an actor's name is 1 to 200 characters")

    @classmethod
    def admin(cls, user_name: str) -> Actor:
        """A platform admin's console account (its e-mail address) or the admin API's token."""
        return cls("admin", user_name)

    @classmethod
    def customer_user(cls, user_name: str) -> Actor:
        """A customer's console account (its e-mail address)."""
        return cls("customer_user", user_name)

    @classmethod
    def gateway_key(cls, display_prefix: str) -> Actor:
        """A gateway key, named by its display prefix (never the key)."""
        return cls("gateway_key", display_prefix)

    @classmethod
    def cli(cls, command: str = "cli") -> Actor:
        """A `pmsgate` command run by an operator."""
        return cls("cli", command)

    @classmethod
    def job(cls, name: str) -> Actor:
        """A scheduled job, by its name."""
        return cls("job", name)

    @classmethod
    def system(cls, name: str = "pmsgate") -> Actor:
        """The service itself (or an unidentified caller, e.g. a failed sign-in)."""
        return cls("system", name)

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"
