"""Steps 15 and 16 of spec §4.3: the channels a person sets up, and the onboarding message.

Step 15 is one manual step with sub-items, each confirmed on its own with
``pmsgate onboard confirm STUDENT channels --item ITEM --evidence "…"``:

- ``whatsapp-number``: a dedicated local WhatsApp number is requested (lead time 2 to
  10 days: due 10 days after the request) and live;
- ``voice-agent``: the voice agent speaks ONE specific language (never multilingual),
  stays on its fixed backend number, and the local number forwards calls to it;
- ``check-call``, ``check-whatsapp``, ``check-escalation``: the final checks (a call
  reaches the voice agent, a WhatsApp message reaches the agent, an escalation
  reaches the right channel).

Which items are required follows the customer file (no WhatsApp number asked →
no ``whatsapp-number`` / ``check-whatsapp``; no voice agent → no ``voice-agent`` /
``check-call``); the escalation check always is.

Step 16 renders the branded message (Jinja2 templates in ``templates/``) and
writes it to ``<data_dir>/outbox/<student_id>-onboarding.eml`` — or sends it by
SMTP when ``PMSGATE_SMTP_URL`` is set, and then writes the same file as the record
of what was sent. The file is the memory that makes the step idempotent: it is
never sent twice (its Message-ID is in the evidence). A crash between the SMTP
send and the write can send it again on the next run: at least once, never lost.
The baseline usage snapshot is recorded once (the repository refuses a second).
"""

from __future__ import annotations

import email.policy
import re
from datetime import date, timedelta
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, parseaddr
from pathlib import Path
from typing import Any

import jinja2
import structlog

from pmsgate import mail
from pmsgate.onboarding.person_tasks import PersonTask
from pmsgate.onboarding.steps import (
    BOTH_ROUTES,
    ManualItem,
    OnboardingContext,
    Step,
    StepKind,
    StepResult,
)
from pmsgate.onboarding.steps_knowledge import KNOWLEDGE_COMMIT
from pmsgate.onboarding.steps_provisioning import CUSTOM_TOOLS, GUEST_AGENT
from pmsgate.onboarding.steps_route_b import ROUTE_B_QUICK_SETUP

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


# --- 15 channels -------------------------------------------------------------------------------


def _item_text(ctx: OnboardingContext, item: ManualItem) -> str:
    voice = ctx.file.channels.voice_agent
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
    wanted = {CHECK_ESCALATION}
    if channels.whatsapp_number:
        wanted |= {WHATSAPP_NUMBER, CHECK_WHATSAPP}
    if channels.voice_agent is not None:
        wanted |= {VOICE_AGENT, CHECK_CALL}
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


# --- 16 onboarding message ---------------------------------------------------------------------


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


def _templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("pmsgate.onboarding", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2")),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


# What each finished step makes live, in the customer's words.
_LIVE_LINES: tuple[tuple[Step, str], ...] = (
    (
        GUEST_AGENT,
        "the guest agent answers guest-inbox messages in the guest's own language, as your copilot",
    ),
    (
        CUSTOM_TOOLS,
        "six booking-system tools: availability, reservation status, in-house "
        "guests, check-in instructions and portal status",
    ),
    (KNOWLEDGE_COMMIT, "the house manual of {apartments} apartments as the agent's knowledge"),
    (
        ROUTE_B_QUICK_SETUP,
        "booking-system answers for every guest question (availability, reservations, check-in)",
    ),
)


async def _message_content(ctx: OnboardingContext) -> dict[str, Any]:
    results = ctx.run.results
    apartments = 0
    config = await ctx.customers.workspaces.find(ctx.student_id)
    if await ctx.customers.customers.find(ctx.student_id) is not None:
        apartments = len(await ctx.customers.apartments.of_student(ctx.student_id))
    live = [
        line.format(apartments=apartments)
        for step, line in _LIVE_LINES
        if (result := results.get(step.id)) is not None and result.done
    ]
    if not live:
        live = ["your workspace and its booking-system connection"]
    pending: list[str] = []
    channels = results.get(CHANNELS.id)
    if channels is not None and not channels.done:
        items = channels.evidence.get("items", {})
        pending = [
            str(entry["what"])
            for entry in items.values()
            if isinstance(entry, dict) and not entry.get("confirmed")
        ]
    sender_name = parseaddr(ctx.settings.mail_from)[0] or "The guest assistant team"
    message = ctx.file.onboarding_message
    return {
        "customer_name": ctx.file.name,
        "workspace_name": config.workspace_name if config else ctx.file.name,
        "route": ctx.route,
        "live": live,
        "pending": pending,
        "login_url": message.login_url,
        "login_email": ctx.file.email,
        "demo_call_url": message.demo_call_url,
        "sender_name": sender_name,
    }


async def build_message(ctx: OnboardingContext) -> EmailMessage:
    """The branded onboarding message (plain text and HTML)."""
    content = await _message_content(ctx)
    env = _templates()
    message = EmailMessage(policy=email.policy.SMTP)
    message["Subject"] = f"Your guest assistant is live - {content['workspace_name']}"
    message["From"] = ctx.settings.mail_from
    message["To"] = ctx.file.recipient
    message["Date"] = format_datetime(ctx.clock.now())
    message["Message-ID"] = message_id(ctx)
    message.set_content(env.get_template("onboarding_message.txt.j2").render(**content))
    message.add_alternative(
        env.get_template("onboarding_message.html.j2").render(**content), subtype="html"
    )
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


async def check_onboarding_message(ctx: OnboardingContext) -> StepResult:
    """The onboarding message is sent (its record in the outbox) and the baseline recorded."""
    sent = _read_sent(outbox_path(ctx))
    baseline = None
    if await ctx.customers.customers.find(ctx.student_id) is not None:
        baseline = await ctx.customers.usage.baseline(ctx.student_id)
    evidence: dict[str, Any] = {"message": sent or "not sent"}
    if baseline is not None:
        evidence["baseline"] = {
            "taken_at": baseline.taken_at.isoformat(),
            "workspace_id": baseline.workspace_id,
            "usd_spent": str(baseline.usd_spent),
            "messages": baseline.messages,
            "tool_calls": baseline.tool_calls,
        }
    missing = [
        what
        for what, ok in (("onboarding message", sent), ("baseline usage", baseline))
        if ok is None
    ]
    if missing:
        return StepResult(
            done=False, evidence=evidence, message="not yet: " + " and ".join(missing)
        )
    assert sent is not None
    return StepResult(
        done=True,
        evidence=evidence,
        message=f"message {sent['message_id']} to {sent['to']} ({sent['transport']}); "
        "baseline usage recorded",
    )


async def apply_onboarding_message(ctx: OnboardingContext) -> None:
    """Record the baseline usage snapshot, then send the message (each only if missing)."""
    services = ctx.customers
    if await services.usage.baseline(ctx.student_id) is None:
        config = await services.workspaces.find(ctx.student_id)
        await services.usage.record(
            ctx.student_id,
            taken_at=ctx.clock.now(),
            usd_spent=0,
            messages=0,
            tool_calls=0,
            upstream_calls=0,
            kind="baseline",
            workspace_id=config.workspace_id if config else None,
            details={
                "source": "onboarding step 16",
                "note": "consumption is counted from this snapshot on; the 6-hourly job "
                "records the periodic ones",
            },
        )
    if _read_sent(outbox_path(ctx)) is None:
        await _send(ctx)


async def describe_onboarding_message(ctx: OnboardingContext) -> str:
    """What apply_onboarding_message would do."""
    smtp = ctx.settings.smtp_url
    how = "send it by SMTP" if smtp is not None else f"write it to {outbox_path(ctx)}"
    return (
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
    by_hand=PersonTask(
        "Read the workspace's usage in the platform dashboard (spend, messages, tool calls) "
        "as the baseline.",
        "the three numbers and when they were read",
    ),
)
