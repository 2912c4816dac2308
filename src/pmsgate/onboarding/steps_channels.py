"""Steps 15 and 16 (docs/requirements.md R21.15, R21.16): the channels, the onboarding message.

Step 15 is one manual step with sub-items, each confirmed on its own with
``pmsgate onboard confirm STUDENT channels --item ITEM --evidence "…"``:

- ``whatsapp-number``: a dedicated local WhatsApp number is requested (lead time 2 to
  10 days: due 10 days after the request) and live;
- ``voice-agent``: the voice agent speaks ONE specific language (never multilingual),
  stays on its fixed backend number, and the local number forwards calls to it;
- ``check-call``, ``check-whatsapp``, ``check-escalation``: the final checks (a call
  reaches the voice agent, a WhatsApp message reaches the agent, an escalation
  reaches the right channel).

The voice-agent items (``voice-agent``, ``check-call``) and the escalation check are
always required — a file without a ``channels.voice_agent`` section gets the voice
items with what to add to it; the WhatsApp items follow the file (no WhatsApp number
asked → no ``whatsapp-number`` / ``check-whatsapp``).

Step 16 goes out only when every automatable step of the route holds in the run
(:func:`steps_not_holding`; on Route B it runs after step 17, so a failed test
conversation sends nothing); until then it waits, naming the steps. It renders the
branded message in the customer's language (:mod:`pmsgate.onboarding.message`) and
writes it to ``<data_dir>/outbox/<student_id>-onboarding.eml`` — or sends it by
SMTP when ``PMSGATE_SMTP_URL`` is set, and then writes the same file as the record
of what was sent. The file is the memory that makes the step idempotent: it is
never sent twice (its Message-ID is in the evidence). A crash between the SMTP
send and the write can send it again on the next run: at least once, never lost.
The baseline usage snapshot is recorded once (the repository refuses a second), read
from the platform's usage — or recorded as unknown with the reason when the platform
has no usage API (:func:`record_baseline`), never as invented zeros.
"""

from __future__ import annotations

import email.policy
import re
from datetime import date, timedelta
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, parseaddr
from pathlib import Path
from typing import Any, cast

import structlog

from pmsgate import mail
from pmsgate.customers.service import upstream_error
from pmsgate.gateway.usage import UsageHistory
from pmsgate.integrations.assistant.client import WorkspaceUsage
from pmsgate.integrations.assistant.errors import AssistantEndpointUnavailable, AssistantError
from pmsgate.onboarding.message import LiveItem, MessageFacts, PendingItem, render, subject
from pmsgate.onboarding.steps import (
    BOTH_ROUTES,
    ROUTE_A,
    ManualItem,
    OnboardingContext,
    Step,
    StepKind,
    StepResult,
)
from pmsgate.onboarding.steps_route_b import ROUTE_B_QUICK_SETUP
from pmsgate.storage.usage import UsageSnapshotView

log = structlog.get_logger(__name__)

WHATSAPP_LEAD_TIME_DAYS = (2, 10)
WHATSAPP_NUMBER = ManualItem(
    "whatsapp-number",
    "request a dedicated local WhatsApp number (lead time 2-10 days) and confirm it is live",
    dated=True,  # due: the request date + the longest lead time
)
VOICE_AGENT = ManualItem(
    "voice-agent",
    "set up the voice agent in ONE language (never multilingual) on its fixed number, "
    "with the local number forwarding calls to it",
)
CHECK_CALL = ManualItem(
    "check-call", "final check: a call to the local number reaches the voice agent"
)
CHECK_WHATSAPP = ManualItem("check-whatsapp", "final check: a WhatsApp message reaches the agent")
CHECK_ESCALATION = ManualItem(
    "check-escalation", "final check: an escalation reaches the right channel"
)
CHANNEL_ITEMS = (WHATSAPP_NUMBER, VOICE_AGENT, CHECK_CALL, CHECK_WHATSAPP, CHECK_ESCALATION)
_NOT_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


# --- channels ----------------------------------------------------------------------------------


def _item_text(ctx: OnboardingContext, item: ManualItem) -> str:
    voice = ctx.file.channels.voice_agent
    if item is VOICE_AGENT and voice is None:
        return (
            item.text + " (the customer file has no channels.voice_agent: add its language, "
            "fixed_number and forwarding_from)"
        )
    if item is VOICE_AGENT and voice is not None:
        text = f"set up the voice agent in `{voice.language}` only (never multilingual)"
        text += f" on its fixed number {voice.fixed_number}" if voice.fixed_number else ""
        if voice.forwarding_from:
            text += f"; forward calls from the local number {voice.forwarding_from} to it"
        return text
    return item.text


def required_channel_items(ctx: OnboardingContext) -> list[ManualItem]:
    """The step-15 items the customer file asks for, in order."""
    channels = ctx.file.channels
    # The voice agent and its call check are always required (docs/requirements.md R21.15), with or
    # without a voice section in the file; the WhatsApp number only when the file asks.
    wanted = {VOICE_AGENT, CHECK_CALL, CHECK_ESCALATION}
    if channels.whatsapp_number:
        wanted |= {WHATSAPP_NUMBER, CHECK_WHATSAPP}
    return [item for item in CHANNEL_ITEMS if item in wanted]


def _whatsapp_requested_on(ctx: OnboardingContext) -> date:
    """When the WhatsApp number was (or is to be) requested: the file, an earlier run, today."""
    if ctx.file.channels.whatsapp_requested_on is not None:
        return ctx.file.channels.whatsapp_requested_on
    earlier = ctx.previous.get(CHANNELS.id, {}).get("whatsapp_requested_on")
    if isinstance(earlier, str):
        try:
            return date.fromisoformat(earlier)
        except ValueError:
            pass
    return ctx.clock.now().date()


async def check_channels(ctx: OnboardingContext) -> StepResult:
    """Every required channel item has a person's evidence."""
    confirmed: dict[str, Any] = ctx.manual_evidence.get(CHANNELS.id, {}).get("items", {})
    required = required_channel_items(ctx)
    items: dict[str, Any] = {}
    pending: list[ManualItem] = []
    for item in required:
        given = confirmed.get(item.id)
        entry: dict[str, Any] = {"what": _item_text(ctx, item), "confirmed": given is not None}
        if isinstance(given, dict):
            entry.update({k: given[k] for k in ("evidence", "confirmed_at", "by") if k in given})
        else:
            pending.append(item)
        items[item.id] = entry
    evidence: dict[str, Any] = {"required_items": [item.id for item in required], "items": items}
    due: date | None = None
    if ctx.file.channels.whatsapp_number:
        requested = _whatsapp_requested_on(ctx)
        evidence["whatsapp_requested_on"] = requested.isoformat()
        evidence["whatsapp_lead_time_days"] = list(WHATSAPP_LEAD_TIME_DAYS)
        if WHATSAPP_NUMBER in pending:
            due = requested + timedelta(days=WHATSAPP_LEAD_TIME_DAYS[1])
            evidence["whatsapp_due"] = due.isoformat()
    voice = ctx.file.channels.voice_agent
    if voice is not None:
        evidence["voice_agent"] = {
            "language": voice.language,
            "fixed_number": voice.fixed_number,
            "forwarding_from": voice.forwarding_from,
        }
    if not pending:
        return StepResult(
            done=True, evidence=evidence, message=f"{len(required)} channel items confirmed"
        )
    waiting = "; ".join(f"[{item.id}] {items[item.id]['what']}" for item in pending)
    return StepResult(
        done=False,
        evidence=evidence,
        message=f"{len(pending)} of {len(required)} channel items waiting for a person",
        waiting_for=waiting,
        due=due,
        fix=f"pmsgate onboard confirm {ctx.student_id} channels --item ITEM --evidence '…'",
    )


# --- onboarding message ------------------------------------------------------------------------


def outbox_path(ctx: OnboardingContext) -> Path:
    """Where the onboarding message of the customer is (or will be) recorded."""
    name = _NOT_FILENAME.sub("_", ctx.student_id).strip("._") or "customer"
    return ctx.settings.data_dir / "outbox" / f"{name}-onboarding.eml"


def message_id(ctx: OnboardingContext) -> str:
    """The message's stable Message-ID: the same customer always gets the same one."""
    _, sender = parseaddr(ctx.settings.mail_from)
    domain = sender.rpartition("@")[2] or "localhost"
    local = _NOT_FILENAME.sub("-", ctx.student_id).strip("-") or "customer"
    return f"<onboarding.{local}@{domain}>"


def _read_sent(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as handle:
            headers = BytesParser(policy=email.policy.default).parse(handle, headersonly=True)
    except FileNotFoundError:
        return None
    return {
        "message_id": str(headers.get("Message-ID", "")),
        "to": str(headers.get("To", "")),
        "sent_at": str(headers.get("Date", "")),
        "transport": str(headers.get("X-Pmsgate-Transport", "outbox")),
        "path": str(path),
    }


def _live_items(ctx: OnboardingContext) -> tuple[LiveItem, ...]:
    """What the message says is live: every automatable step of the route holds by now."""
    if ctx.route == ROUTE_A:
        return ("guest_agent", "tools", "knowledge")
    return ("guest_agent", "tools", "tested")


def _pending_items(ctx: OnboardingContext) -> tuple[PendingItem, ...]:
    """The channel items (step 15) not yet confirmed: what is being finished with them."""
    channels = ctx.run.results.get(CHANNELS.id)
    if channels is None or channels.done:
        return ()
    items = channels.evidence.get("items", {})
    known = {item.id for item in CHANNEL_ITEMS}
    return tuple(
        cast(PendingItem, item_id)
        for item_id, entry in items.items()
        if item_id in known and isinstance(entry, dict) and not entry.get("confirmed")
    )


def login_url(ctx: OnboardingContext) -> str:
    """Where the message tells the customer to sign in: the console's own sign-in page.

    ``PMSGATE_PUBLIC_URL`` (else the gateway's public URL) + ``/login``; the customer
    file's ``onboarding_message.login_url`` only when neither is configured.
    """
    base = ctx.settings.console_url
    if base is not None:
        return f"{base}/login"
    return ctx.file.onboarding_message.login_url or ""


async def message_facts(ctx: OnboardingContext) -> MessageFacts:
    """The facts of the customer's onboarding message (the wording is the template's)."""
    apartments = 0
    config = await ctx.customers.workspaces.find(ctx.student_id)
    if await ctx.customers.customers.find(ctx.student_id) is not None:
        apartments = len(await ctx.customers.apartments.of_student(ctx.student_id))
    channels = ctx.run.results.get(CHANNELS.id)
    due = channels.evidence.get("whatsapp_due") if channels is not None else None
    voice = ctx.file.channels.voice_agent
    message = ctx.file.onboarding_message
    return MessageFacts(
        language=ctx.file.language,
        timezone=ctx.file.timezone,
        customer_name=ctx.file.name,
        workspace_name=config.workspace_name if config else ctx.file.name,
        login_url=login_url(ctx),
        login_email=ctx.file.email,
        demo_call_url=message.demo_call_url,
        live=_live_items(ctx),
        apartments=apartments,
        pending=_pending_items(ctx),
        whatsapp_due=date.fromisoformat(due) if isinstance(due, str) else None,
        voice_language=voice.language if voice is not None else None,
        voice_forwarding_from=voice.forwarding_from if voice is not None else None,
    )


async def build_message(ctx: OnboardingContext) -> EmailMessage:
    """The branded onboarding message (plain text and HTML) in the customer's language."""
    facts = await message_facts(ctx)
    text, html = render(facts, ctx.settings)
    message = EmailMessage(policy=email.policy.SMTP)
    message["Subject"] = subject(facts)
    message["From"] = ctx.settings.mail_from
    message["To"] = ctx.file.recipient
    message["Date"] = format_datetime(ctx.clock.now())
    message["Message-ID"] = message_id(ctx)
    message.set_content(text)
    message.add_alternative(html, subtype="html")
    message["Content-Language"] = facts.language  # after the content: set_content drops it
    return message


async def _send(ctx: OnboardingContext) -> None:
    path = outbox_path(ctx)
    message = await build_message(ctx)
    transport = await mail.deliver(ctx.settings, message, path, what="The onboarding message")
    log.info(
        "onboarding_message_recorded",
        student_id=ctx.student_id,
        transport=transport,
        path=str(path),
    )


def steps_not_holding(ctx: OnboardingContext) -> list[Step]:
    """The automatable steps of the run that do not hold in it (step 16 waits for them).

    Every ``auto`` and ``check`` step of the run's route other than step 16 itself must be
    done in this run — on Route B that includes step 17's test conversation, which is why
    step 16 runs after step 17 (``runs_after``); with the route undecided, every step of
    both routes (step 9 among them). Manual steps (15) never hold the message back: what a
    person still has to do is in it, as what is being finished with the customer.

    The run's steps are ``ctx.run.steps`` (set with the context); a context without them
    is refused rather than read as "nothing else to hold".
    """
    steps = ctx.run.steps
    if not steps:
        raise RuntimeError("step 16 needs the run's steps (ctx.run.steps)")
    return [
        step
        for step in steps
        if step.kind is not StepKind.MANUAL
        and step.id != ONBOARDING_MESSAGE.id
        and (ctx.route in step.routes if ctx.route is not None else step.routes >= BOTH_ROUTES)
        and not ((result := ctx.run.results.get(step.id)) is not None and result.done)
    ]


def _baseline_evidence(baseline: UsageSnapshotView) -> dict[str, Any]:
    if not baseline.known:
        reason = (baseline.details or {}).get("unknown_reason", "not read")
        return {
            "taken_at": baseline.taken_at.isoformat(),
            "workspace_id": baseline.workspace_id,
            "usage": "unknown",
            "reason": reason,
            "upstream_calls": baseline.upstream_calls,
        }
    return {
        "taken_at": baseline.taken_at.isoformat(),
        "workspace_id": baseline.workspace_id,
        "usd_spent": str(baseline.usd_spent),
        "messages": baseline.messages,
        "tool_calls": baseline.tool_calls,
        "upstream_calls": baseline.upstream_calls,
    }


async def check_onboarding_message(ctx: OnboardingContext) -> StepResult:
    """The onboarding message is sent (its record in the outbox) and the baseline recorded.

    Not sent yet and some automatable step does not hold: the step waits (nothing is
    applied) and says which — a Route B run whose test conversation failed sends nothing.
    """
    sent = _read_sent(outbox_path(ctx))
    baseline = None
    if await ctx.customers.customers.find(ctx.student_id) is not None:
        baseline = await ctx.customers.usage.baseline(ctx.student_id)
    evidence: dict[str, Any] = {"message": sent or "not sent", "language": ctx.file.language}
    if baseline is not None:
        evidence["baseline"] = _baseline_evidence(baseline)
    account = None
    if ctx.accounts is not None:
        account = await ctx.accounts.state(ctx.student_id, ctx.file.email)
        evidence["console_account"] = {
            "email": account.email,
            "exists": account.exists,
            "invited_at": account.invited_at.isoformat() if account.invited_at else None,
            "password_set": account.password_set,
        }
    if sent is None:
        blocking = steps_not_holding(ctx)
        if blocking:
            named = ", ".join(f"{step.number} ({step.id})" for step in blocking)
            evidence["waiting_for_steps"] = [step.id for step in blocking]
            return StepResult(
                done=False,
                evidence=evidence,
                message=f"not sent: the assistant is not live until steps {named} hold",
                waiting_for=f"steps {named} to be done; the message goes out on the run in "
                "which every automatable step holds",
            )
    account_ready = True if account is None else (account.ready or None)
    missing = [
        what
        for what, ok in (
            ("onboarding message", sent),
            ("baseline usage", baseline),
            ("the console account's invitation", account_ready),
        )
        if ok is None
    ]
    if missing:
        return StepResult(
            done=False, evidence=evidence, message="not yet: " + " and ".join(missing)
        )
    assert sent is not None and baseline is not None
    return StepResult(
        done=True,
        evidence=evidence,
        message=f"message {sent['message_id']} to {sent['to']} ({sent['transport']}); "
        + ("baseline usage recorded" if baseline.known else "baseline usage unknown (see why)"),
    )


async def record_baseline(ctx: OnboardingContext) -> UsageSnapshotView:
    """The baseline usage snapshot, read from the platform's usage (once per customer).

    The platform's cumulative usage (``GET /v1/workspaces/{id}/usage``, an endpoint only
    assumed: docs/assistant-api.md) and the gateway's own booking-system request count.
    When the platform offers no usage API (it refuses the endpoint), the baseline is
    recorded as **unknown** with the reason — never as invented zeros; any other platform
    failure fails the step, to be retried by the next run.
    """
    services = ctx.customers
    existing = await services.usage.baseline(ctx.student_id)
    if existing is not None:
        return existing
    customer = await ctx.customer_context()
    workspace_id = customer.workspace_id
    details: dict[str, Any] = {
        "source": "onboarding step 16",
        "note": "consumption is counted from this snapshot on; the 6-hourly job records "
        "the periodic ones",
    }
    usage: WorkspaceUsage | None = None
    if workspace_id is None:
        details["unknown_reason"] = "no platform workspace is recorded for the customer"
    else:
        try:
            usage = await services.assistant.workspace_usage(workspace_id)
        except AssistantEndpointUnavailable as error:
            details["unknown_reason"] = (
                f"the platform offers no usage API ({error.endpoint} refused with HTTP "
                f"{error.status}); read it in the platform dashboard if needed"
            )
        except AssistantError as error:
            raise upstream_error(error, "reading the workspace's usage") from None
    gateway = None
    if customer.hotel_id is not None:
        gateway = await UsageHistory(services.sessions).total(customer.hotel_id)
    if usage is not None:
        details["platform_as_of"] = usage.as_of.isoformat() if usage.as_of else None
        details.update(usage.model_extra or {})
    snapshot, _ = await services.usage.record(
        ctx.student_id,
        taken_at=ctx.clock.now(),
        usd_spent=usage.usd_spent if usage is not None else None,
        messages=usage.messages if usage is not None else None,
        tool_calls=usage.tool_calls if usage is not None else None,
        upstream_calls=gateway.upstream_calls if gateway is not None else 0,
        kind="baseline",
        workspace_id=workspace_id,
        details=details,
    )
    return snapshot


async def apply_onboarding_message(ctx: OnboardingContext) -> None:
    """Record the baseline usage snapshot, create and invite the customer's console
    account, then send the message (each only if missing: a second run sends nothing)."""
    await record_baseline(ctx)
    if ctx.accounts is not None:
        await ctx.accounts.ensure_invited(ctx.student_id, ctx.file.email)
    if _read_sent(outbox_path(ctx)) is None:
        await _send(ctx)


async def describe_onboarding_message(ctx: OnboardingContext) -> str:
    """What apply_onboarding_message would do."""
    smtp = ctx.settings.smtp_url
    how = "send it by SMTP" if smtp is not None else f"write it to {outbox_path(ctx)}"
    return (
        f"create the console account {ctx.file.email} and send its invitation (once); "
        f"render the onboarding message to {ctx.file.recipient} and {how}; "
        "record the baseline usage snapshot"
    )


CHANNELS = Step(
    number=15,
    id="channels",
    title="Channels (WhatsApp, voice agent, final checks)",
    kind=StepKind.MANUAL,
    routes=BOTH_ROUTES,
    check=check_channels,
    items=CHANNEL_ITEMS,
)
ONBOARDING_MESSAGE = Step(
    number=16,
    id="onboarding-message",
    title="Onboarding message, baseline usage",
    kind=StepKind.AUTO,
    routes=BOTH_ROUTES,
    check=check_onboarding_message,
    apply=apply_onboarding_message,
    describe=describe_onboarding_message,
    # Route B: the message waits for step 17's test conversation (steps_not_holding).
    runs_after=(ROUTE_B_QUICK_SETUP.id,),
)
