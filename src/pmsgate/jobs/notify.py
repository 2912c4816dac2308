"""notify-incidents: a facility in ``error`` is told, once per incident; its recovery too.

Each tick (every 60 s by default) compares every facility's status with the notices
already recorded (``incident_notices``) and does what is missing:

1. **Plan.** A facility in ``error`` has an *incident*, named by the moment it went there
   (``facilities.status_changed_at``). For it, one ``error`` notice per channel is planned:
   the customer (the address of the customer record linked through its kross integration),
   the team (``PMSGATE_NOTIFY_TEAM_EMAIL``) and the chat webhook
   (``PMSGATE_NOTIFY_WEBHOOK_URL``), each only when configured. A facility no longer in
   error whose latest incident had notices sent gets one ``recovered`` notice per channel
   that was told; notices of it not yet sent are *skipped* (the problem is gone). Planning
   is an insert on the unique key (facility, incident, kind, channel): every replica may
   plan, one row exists, so one message goes out.
2. **Deliver.** Each pending notice is *claimed* (a conditional update only one replica
   wins, a lease of :data:`CLAIM_LEASE`), sent — e-mail through :mod:`pmsgate.mail` (SMTP
   or the outbox), the webhook through an httpx POST with :data:`WEBHOOK_TIMEOUT_S` — and
   settled: ``sent``, or back to ``pending`` for the next tick with its error code, and
   ``failed`` after :data:`MAX_ATTEMPTS`. Every delivery and failure is an audit event
   (``notice.sent`` / ``notice.failed``). A crash between a send and its settling sends it
   again once the lease ends: at least once, never lost, never twice in the normal case.

The customer's ``error`` notice carries a one-time sign-in link (``/login/link/<token>``,
:meth:`pmsgate.web.users.UserService.create_login_link`: single use, expires after
``PMSGATE_LOGIN_LINK_TTL_S``) to its page's reconnect form, when the customer has a
console login and a public URL is configured (``PMSGATE_PUBLIC_URL``, else
``PMSGATE_GATEWAY_PUBLIC_URL``). The job runs apart from the gateway's requests: a slow
mail server or webhook costs only this job's tick. docs/operations.md, Notifications.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import parseaddr
from secrets import token_hex
from typing import Any
from urllib.parse import quote

import httpx
import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate import mail
from pmsgate.audit.actions import Actor, AuditAction, Outcome
from pmsgate.audit.trail import AuditTrail
from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.errors import PmsgateError
from pmsgate.gateway.facilities import subject_of
from pmsgate.i18n import DEFAULT_TIMEZONE
from pmsgate.jobs.notice_messages import (
    CustomerNotice,
    TeamNotice,
    customer_message,
    language_of,
    team_message,
    webhook_payload,
)
from pmsgate.jobs.spec import JobPartlyFailed
from pmsgate.storage.notices import FacilityState, IncidentNoticeRepository, NoticeRecord
from pmsgate.web.context import WebServices
from pmsgate.web.users import UserService

log = structlog.get_logger(__name__)

NOTIFY_INCIDENTS = "notify-incidents"
ACTOR = Actor.job(NOTIFY_INCIDENTS)
MAX_ATTEMPTS = 6
CLAIM_LEASE = timedelta(minutes=5)
WEBHOOK_TIMEOUT_S = 10.0
LINK_PURPOSE = "reconnect"
WEBHOOK_RECIPIENT = "webhook"
_NOT_ID = re.compile(r"[^A-Za-z0-9]+")


def reconnect_path(student_id: str) -> str:
    """The customer's page, at its reconnect form (the console keeps ``id="reconnect"``)."""
    return f"/console/customers/{quote(student_id, safe='')}#reconnect"


def login_link_path(token: str) -> str:
    """The path of a one-time sign-in link (web/auth.py serves it)."""
    return f"/login/link/{token}"


class WebhookFailed(PmsgateError):
    """The team's webhook did not take the notice (no answer, or not a 2xx)."""

    code = "webhook_failed"
    status = 502
    hint = "Check PMSGATE_NOTIFY_WEBHOOK_URL and that the chat service is reachable."


@dataclass(frozen=True)
class Delivered:
    """How a notice went out: its transport and whether it carried a sign-in link."""

    transport: str
    with_link: bool = False


class IncidentNotifier:
    """Plans and delivers incident notices (one tick of ``notify-incidents``)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        clock: Clock,
        settings: Settings,
        audit: AuditTrail,
        users: UserService,
        webhook_http: httpx.AsyncClient | None = None,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._settings = settings
        self._audit = audit
        self._users = users
        self._webhook_http = webhook_http

    # --- one tick --------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        """Plan what is missing, deliver what is pending; the tick's summary."""
        states = {state.facility_id: state for state in await self._states()}
        planned, skipped = await self.plan(list(states.values()))
        summary: dict[str, Any] = {
            "in_error": sorted(s.hotel_id for s in states.values() if s.status == "error"),
            "planned": planned,
            "skipped": skipped,
            "sent": [],
            "retrying": [],
            "failed": [],
        }
        async with self._sessions() as session:
            pending = await IncidentNoticeRepository(session).pending(self._clock.now())
        for notice in pending:
            state = states.get(notice.facility_id)
            if state is None:
                continue  # a facility added since the plan: the next tick sees it
            outcome = await self._deliver(notice, state)
            if outcome is not None:
                summary[outcome].append(_label(notice, state))
        if summary["retrying"] or summary["failed"]:
            raise JobPartlyFailed(
                f"{len(summary['retrying']) + len(summary['failed'])} incident notices could "
                "not be delivered.",
                summary,
            )
        return summary

    async def _states(self) -> list[FacilityState]:
        async with self._sessions() as session:
            return await IncidentNoticeRepository(session).facility_states()

    # --- planning --------------------------------------------------------------------------

    def _channels(self, state: FacilityState) -> list[tuple[str, str]]:
        channels: list[tuple[str, str]] = []
        if state.student_id and state.customer_email:
            channels.append(("customer", state.customer_email))
        team = (self._settings.notify_team_email or "").strip()
        if team:
            channels.append(("team", team))
        if mail_secret(self._settings.notify_webhook_url):
            channels.append(("webhook", WEBHOOK_RECIPIENT))
        return channels

    async def plan(self, states: list[FacilityState]) -> tuple[int, int]:
        """Add the notices the facilities' statuses call for; (planned, skipped)."""
        planned = skipped = 0
        now = self._clock.now()
        async with self._sessions.begin() as session:
            notices = IncidentNoticeRepository(session)
            for state in states:
                if state.status == "error":
                    incident = state.status_changed_at
                    # An older incident's notices not sent yet are no longer true.
                    skipped += await notices.skip_pending_before(state.facility_id, incident, now)
                    for channel, recipient in self._channels(state):
                        planned += await notices.plan(
                            facility_id=state.facility_id,
                            incident_at=incident,
                            kind="error",
                            channel=channel,
                            recipient=recipient,
                            student_id=state.student_id,
                            now=now,
                        )
                    continue
                latest = await notices.latest_incident(state.facility_id)
                if latest is None:
                    continue
                # Recovered: the error notices not sent yet are moot; those sent get a sequel.
                skipped += await notices.skip_pending(state.facility_id, latest, "error", now)
                for told in await notices.of_incident(state.facility_id, latest):
                    if told.kind != "error" or told.status not in ("sent", "failed"):
                        continue
                    planned += await notices.plan(
                        facility_id=state.facility_id,
                        incident_at=latest,
                        kind="recovered",
                        channel=told.channel,
                        recipient=told.recipient,
                        student_id=told.student_id,
                        now=now,
                    )
        return planned, skipped

    # --- a sign-in link sent again (the console's "resend") --------------------------------

    async def resend_link(self, facility_id: int) -> tuple[str, str]:
        """The customer's error notice again, with a new one-time sign-in link; (transport,
        recipient). Its own message (Message-ID, outbox file), so a mail client shows both."""
        state = next((s for s in await self._states() if s.facility_id == facility_id), None)
        if state is None or not state.student_id or not state.customer_email:
            raise PmsgateError(
                "This facility has no customer address to write to.",
                code="customer_address_missing",
                status=409,
                hint="Link the facility to its customer (`pmsgate customers link-kross`).",
            )
        now = self._clock.now()
        notice = NoticeRecord(
            id=0,
            facility_id=facility_id,
            incident_at=state.status_changed_at,
            kind="error",
            channel="customer",
            recipient=state.customer_email,
            student_id=state.student_id,
            status="pending",
            attempts=0,
            last_error=None,
            created_at=now,
            sent_at=None,
        )
        message, with_link = await self._customer_message(notice, state)
        if not with_link:
            raise PmsgateError(
                "The customer has no console account to sign in to.",
                code="customer_login_missing",
                status=409,
                hint="Send the invitation from the customer's page instead.",
            )
        tag = f"{self._incident_tag(notice, state)}.resent.{now:%Y%m%dT%H%M%S}.{token_hex(4)}"
        domain = parseaddr(self._settings.mail_from)[1].rpartition("@")[2] or "localhost"
        message.replace_header("Message-ID", f"<incident.{tag}@{domain}>")
        path = mail.outbox_dir(self._settings) / f"{mail.safe_filename(f'incident-{tag}')}.eml"
        transport = await mail.deliver(self._settings, message, path, what="The sign-in link")
        log.info("incident_link_resent", hotel_id=state.hotel_id, transport=transport)
        return transport, state.customer_email

    # --- delivery --------------------------------------------------------------------------

    async def _deliver(self, notice: NoticeRecord, state: FacilityState) -> str | None:
        now = self._clock.now()
        async with self._sessions.begin() as session:
            if not await IncidentNoticeRepository(session).claim(notice.id, now, now + CLAIM_LEASE):
                return None  # another replica has it
        attempt = notice.attempts + 1
        try:
            delivered = await self._send(notice, state)
        except Exception as error:
            code = error.code if isinstance(error, PmsgateError) else "unexpected_error"
            gave_up = attempt >= MAX_ATTEMPTS
            await self._settle(
                notice, status="failed" if gave_up else "pending", attempts=attempt, error=code
            )
            log.warning(
                "incident_notice_failed",
                hotel_id=state.hotel_id,
                kind=notice.kind,
                channel=notice.channel,
                attempt=attempt,
                code=code,
                error_type=type(error).__name__,
            )
            await self._record(
                AuditAction.NOTICE_FAILED,
                notice,
                state,
                outcome=Outcome.FAILURE,
                details={
                    "attempt": attempt,
                    "code": code,
                    "retried": not gave_up,
                    "max_attempts": MAX_ATTEMPTS,
                },
            )
            return "failed" if gave_up else "retrying"
        await self._settle(notice, status="sent", attempts=attempt, error=None)
        log.info(
            "incident_notice_sent",
            hotel_id=state.hotel_id,
            kind=notice.kind,
            channel=notice.channel,
            transport=delivered.transport,
        )
        await self._record(
            AuditAction.NOTICE_SENT,
            notice,
            state,
            outcome=Outcome.SUCCESS,
            details={
                "attempt": attempt,
                "transport": delivered.transport,
                "sign_in_link": delivered.with_link,
            },
        )
        return "sent"

    async def _settle(
        self, notice: NoticeRecord, *, status: str, attempts: int, error: str | None
    ) -> None:
        async with self._sessions.begin() as session:
            await IncidentNoticeRepository(session).settle(
                notice.id,
                status=status,
                attempts=attempts,
                last_error=error,
                now=self._clock.now(),
            )

    async def _record(
        self,
        action: AuditAction,
        notice: NoticeRecord,
        state: FacilityState,
        *,
        outcome: Outcome,
        details: dict[str, Any],
    ) -> None:
        await self._audit.record(
            action,
            actor=ACTOR,
            subject=subject_of(state.hotel_id),
            outcome=outcome,
            details={
                "kind": notice.kind,
                "channel": notice.channel,
                # The team's address stays out: the customer's trail shows its facility's events.
                "recipient": notice.recipient if notice.channel == "customer" else notice.channel,
                "incident_at": notice.incident_at,
                **details,
            },
            facility_id=state.facility_id,
            student_id=notice.student_id,
        )

    async def _send(self, notice: NoticeRecord, state: FacilityState) -> Delivered:
        if notice.channel == "webhook":
            await self._post_webhook(self._team_notice(notice, state))
            return Delivered("webhook")
        with_link = False
        if notice.channel == "customer":
            message, with_link = await self._customer_message(notice, state)
        else:
            message = team_message(
                self._team_notice(notice, state),
                mail_from=self._settings.mail_from,
                to=notice.recipient,
                sent_at=self._clock.now(),
                message_id=self._message_id(notice, state),
            )
        transport = await mail.deliver(
            self._settings, message, self._record_path(notice, state), what="The incident notice"
        )
        return Delivered(transport, with_link)

    async def _customer_message(
        self, notice: NoticeRecord, state: FacilityState
    ) -> tuple[EmailMessage, bool]:
        base = self._settings.console_url
        since = self._clock.now() if notice.kind == "recovered" else notice.incident_at
        if notice.kind == "recovered" and state.status != "error":
            since = state.status_changed_at
        link: str | None = None
        expires: datetime | None = None
        has_login = True
        if notice.kind == "error" and notice.student_id:
            issued = None
            if base is not None:
                issued = await self._users.create_login_link(
                    notice.student_id,
                    preferred_email=notice.recipient,
                    target=reconnect_path(notice.student_id),
                    purpose=LINK_PURPOSE,
                    ttl=timedelta(seconds=self._settings.login_link_ttl_s),
                )
                has_login = issued is not None
            if issued is not None and base is not None:
                link = base + login_link_path(issued.token)
                expires = issued.expires_at
        content = CustomerNotice(
            kind="recovered" if notice.kind == "recovered" else "error",
            language=language_of(state.customer_language),
            customer_name=state.customer_name or "",
            facility_name=state.name if state.name != state.customer_name else "",
            since=since,
            sign_in_url=link,
            link_expires_at=expires,
            console_url=f"{base}/login" if base else None,
            has_login=has_login,
            timezone=state.customer_timezone or DEFAULT_TIMEZONE,
        )
        message = customer_message(
            content,
            brand_name=self._settings.brand_name,
            mail_from=self._settings.mail_from,
            to=notice.recipient,
            sent_at=self._clock.now(),
            message_id=self._message_id(notice, state),
        )
        return message, link is not None

    def _team_notice(self, notice: NoticeRecord, state: FacilityState) -> TeamNotice:
        base = self._settings.console_url
        since = notice.incident_at
        if notice.kind == "recovered":
            since = state.status_changed_at if state.status != "error" else self._clock.now()
        admin_url = None
        if base is not None and state.student_id:
            admin_url = f"{base}/console/customers/{quote(state.student_id, safe='')}"
        return TeamNotice(
            kind="recovered" if notice.kind == "recovered" else "error",
            hotel_id=state.hotel_id,
            facility_name=state.name,
            since=since,
            incident_at=notice.incident_at,
            reason=state.last_error if notice.kind == "error" else None,
            student_id=state.student_id,
            customer_name=state.customer_name,
            customer_email=state.customer_email,
            customer_told=bool(state.student_id and state.customer_email),
            admin_url=admin_url,
        )

    async def _post_webhook(self, notice: TeamNotice) -> None:
        url = mail_secret(self._settings.notify_webhook_url)
        if url is None or self._webhook_http is None:
            raise WebhookFailed("No webhook is configured.")
        try:
            answer = await self._webhook_http.post(
                url, json=webhook_payload(notice), timeout=WEBHOOK_TIMEOUT_S
            )
        except httpx.HTTPError as error:
            # The type only: the URL (a secret) may be in the message.
            raise WebhookFailed(
                f"The webhook could not be reached ({type(error).__name__})."
            ) from None
        if not answer.is_success:
            raise WebhookFailed(f"The webhook answered HTTP {answer.status_code}.")

    def _incident_tag(self, notice: NoticeRecord, state: FacilityState) -> str:
        hotel = _NOT_ID.sub("-", state.hotel_id).strip("-") or "facility"
        return f"{hotel}.{notice.incident_at:%Y%m%dT%H%M%S}.{notice.kind}.{notice.channel}"

    def _message_id(self, notice: NoticeRecord, state: FacilityState) -> str:
        """Stable per notice: a message sent twice (a crash mid-send) is one to mail clients."""
        domain = parseaddr(self._settings.mail_from)[1].rpartition("@")[2] or "localhost"
        return f"<incident.{self._incident_tag(notice, state)}@{domain}>"

    def _record_path(self, notice: NoticeRecord, state: FacilityState) -> Any:
        name = mail.safe_filename(f"incident-{self._incident_tag(notice, state)}")
        return mail.outbox_dir(self._settings) / f"{name}.eml"


def mail_secret(value: Any) -> str | None:
    """A SecretStr setting's value, or None when unset or blank."""
    if value is None:
        return None
    text = str(value.get_secret_value()).strip()
    return text or None


def _label(notice: NoticeRecord, state: FacilityState) -> dict[str, str]:
    return {"hotel_id": state.hotel_id, "kind": notice.kind, "channel": notice.channel}


class ReconnectLinkMailer(IncidentNotifier):
    """The console's "resend the sign-in link" (:class:`pmsgate.web.incidents.SignInLinkMailer`):
    the customer's error notice again, through the notifier's own message, never a copy."""

    async def send_reconnect_link(self, facility_id: int) -> tuple[str, str]:
        """E-mail the facility's customer a new one-time link to its reconnect form."""
        return await self.resend_link(facility_id)


async def notify_incidents(web: WebServices) -> dict[str, Any]:
    """One tick of ``notify-incidents`` on the process's services.

    The incidents are reconciled first (:meth:`pmsgate.web.incidents.IncidentService.reconcile`):
    an incident opens in the same tick as its notices are planned, and its timeline reads
    them; every replica may run both (docs/operations.md, Incidents).
    """
    incidents = await web.incidents.reconcile()
    webhook_http = (
        web.customers.http_factory() if mail_secret(web.settings.notify_webhook_url) else None
    )
    try:
        notifier = IncidentNotifier(
            web.customers.sessions,
            clock=web.clock,
            settings=web.settings,
            audit=web.audit,
            users=web.users,
            webhook_http=webhook_http,
        )
        try:
            summary = await notifier.run()
        except JobPartlyFailed as failed:
            failed.summary["incidents"] = incidents.as_dict()
            raise
        return {**summary, "incidents": incidents.as_dict()}
    finally:
        if webhook_http is not None:
            await webhook_http.aclose()
