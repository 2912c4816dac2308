"""The web application's JSON API: the knowledge sync and the booking-system reconnect.

Routes (every error is ``{"error": {"code", "message", "hint"}}``; docs/web.md):

- ``POST /api/{assistant}/sync-knowledge`` ``{"commit": bool}`` — a dry run or a commit
  (docs/requirements.md R17.1, R17.2). It waits at most ``PMSGATE_SYNC_MAX_DURATION_S`` (800 s):
  finished → 200 with the sync's counters; still running → 202 with the job
  to poll (``Location``). ``?wait=false`` answers 202 at once.
- ``GET /api/{assistant}/sync-knowledge`` (the latest job) and
  ``GET /api/{assistant}/sync-knowledge/{job_id}`` (one job of the customer).
- ``PUT /api/admin/kross/connect`` (platform admin, docs/requirements.md R13.3) and
  ``PUT /api/{assistant}/kross/connect`` (the customer itself, or an admin): new
  booking-system credentials, tried before anything is stored
  (:func:`pmsgate.customers.reconnect.connect_kross`).
- ``GET /api/{assistant}/status`` — integration states, registry listings, latest sync.

``{assistant}`` names the customer: its workspace slug (``workspace_configurations``),
or its student_id. A customer may act on itself only; an unknown assistant is a 403 for
a customer too, so a customer never learns which other assistants exist.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue, SecretStr

from pmsgate.boundary import (
    API_KEY_SCHEMA,
    HOTEL_ID_SCHEMA,
    NOT_BLANK_TEXT_PATTERN,
    api_password_field,
    api_user_field,
)
from pmsgate.customers.checks import customer_not_found
from pmsgate.customers.reconnect import connect_kross
from pmsgate.errors import Conflict, Forbidden, InvalidInput, PmsgateError
from pmsgate.knowledge.records import job_not_found
from pmsgate.knowledge.sync_jobs import job_summary
from pmsgate.storage.knowledge import SyncJobView
from pmsgate.web.actions import console_action, ready_for_sync
from pmsgate.web.auth import AdminWrite, SignedIn, SignedInWrite, actor_of, ensure_can_act_on
from pmsgate.web.context import WebDep, WebServices
from pmsgate.web.users import Principal, has_control_characters

router = APIRouter(tags=["web"])

# Answers about a customer are never for a shared cache.
NO_STORE = {"Cache-Control": "no-store"}

# A failed job's error codes that say "the customer's state is not ready" (409), not that
# an upstream failed while the sync ran (502).
_STATE_CODES = frozenset(
    {
        "customer_not_found",
        "notes_not_connected",
        "workspace_not_created",
        "pms_not_linked",
        "sync_cancelled",
        "sync_interrupted",
    }
)


# --- bodies --------------------------------------------------------------------------------------


class SyncBody(BaseModel):
    """``POST /api/{assistant}/sync-knowledge``: a dry run (false) or a commit (true)."""

    # Strict: "true" or 1 are refused rather than guessed (a commit writes to the platform).
    model_config = ConfigDict(extra="forbid", strict=True)

    commit: bool = Field(description="false: dry run (nothing written); true: commit.")


class ConnectBody(BaseModel):
    """``PUT /api/{assistant}/kross/connect``: the facility's new booking-system credentials."""

    # Inputs never appear in a validation error (the password is one of them).
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        hide_input_in_errors=True,
        coerce_numbers_to_str=True,
    )

    username: str = api_user_field()
    password: SecretStr = api_password_field()
    api_key: SecretStr | None = Field(
        default=None,
        alias="apiKey",
        description="Own facilities only: their api key (32 hexadecimal characters); "
        "left out, the stored one is kept.",
        json_schema_extra=API_KEY_SCHEMA,
    )
    hotel_id: str | None = Field(
        default=None,
        alias="hotelId",
        description="The facility's hotel_id; when given it must be the customer's facility.",
        json_schema_extra=HOTEL_ID_SCHEMA,
    )


# A customer named by its student_id or workspace slug: text that is not blank.
_NAMED: dict[str, JsonValue] = {"type": "string", "pattern": NOT_BLANK_TEXT_PATTERN}


class AdminConnectBody(ConnectBody):
    """``PUT /api/admin/kross/connect``: the same, naming the customer (exactly one way)."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["studentId"],
                    "properties": {"studentId": _NAMED},
                    "not": {"required": ["assistant"]},
                },
                {
                    "required": ["assistant"],
                    "properties": {"assistant": _NAMED},
                    "not": {"required": ["studentId"]},
                },
            ]
        }
    )

    student_id: str | None = Field(default=None, alias="studentId")
    assistant: str | None = Field(
        default=None, description="The customer's workspace slug (instead of studentId)."
    )


# --- errors that point at a job ------------------------------------------------------------------


class JobError(PmsgateError):
    """An error about a sync job: its body also names the job (``jobId``, ``statusUrl``)."""

    def __init__(self, error: PmsgateError, job_id: str, status_url: str) -> None:
        super().__init__(
            error.message,
            code=error.code,
            status=error.status,
            hint=error.hint,
            headers=error.headers,
        )
        self.job_id = job_id
        self.status_url = status_url

    def to_body(self) -> dict[str, Any]:
        """The usual error body, plus the job."""
        body = super().to_body()
        body["error"]["jobId"] = self.job_id
        body["error"]["statusUrl"] = self.status_url
        return body


# --- helpers -------------------------------------------------------------------------------------


async def student_of(web: WebServices, assistant: str) -> str | None:
    """The student_id an ``{assistant}`` segment names: a workspace slug, else a student_id."""
    key = assistant.strip()
    # A control character (NUL from %00) names no assistant and PostgreSQL refuses it.
    if not key or has_control_characters(key):
        return None
    config = await web.customers.workspaces.by_slug(key)
    if config is not None:
        return config.student_id
    customer = await web.customers.customers.find(key)
    return customer.student_id if customer is not None else None


async def resolve_assistant(web: WebServices, principal: Principal, assistant: str) -> str:
    """The customer the caller may act on; 403 for another's, 404 (admins) when unknown."""
    student_id = await student_of(web, assistant)
    if student_id is None:
        if not principal.is_admin:
            # A customer learns nothing about assistants that are not its own: the same 403.
            raise Forbidden(
                "You may act on your own assistant only.",
                hint="Use the assistant of your own account (your console page links to it).",
            )
        raise customer_not_found(assistant.strip())
    ensure_can_act_on(principal, student_id)
    return student_id


def _status_url(request: Request, assistant: str, job_id: str) -> str:
    root = str(request.scope.get("root_path", "")).rstrip("/")
    return f"{root}/api/{quote(assistant, safe='')}/sync-knowledge/{quote(job_id, safe='')}"


def _running(job: SyncJobView, status_url: str) -> JSONResponse:
    """202: the job is still running; poll ``statusUrl`` (also the ``Location``)."""
    return JSONResponse(
        {
            "jobId": job.id,
            "status": job.status,
            "commit": job.kind == "commit",
            "progress": {"done": job.progress_done, "total": job.progress_total},
            "statusUrl": status_url,
        },
        status_code=202,
        headers={**NO_STORE, "Location": status_url},
    )


def _finished(job: SyncJobView, status_url: str) -> JSONResponse:
    """200 with the counters at the top level; a failed job as its error."""
    if job.status != "succeeded":
        code = job.error_code or "sync_failed"
        raise JobError(
            PmsgateError(
                job.error or "The knowledge sync failed.",
                code=code,
                status=409 if code in _STATE_CODES else 502,
                hint="Read the job's error, correct the cause, then run the sync again "
                "(a sync resumes without duplicates).",
            ),
            job.id,
            status_url,
        )
    return JSONResponse(
        {
            **(job.counters or {}),
            "jobId": job.id,
            "status": job.status,
            "commit": job.kind == "commit",
            "statusUrl": status_url,
        },
        headers=NO_STORE,
    )


# --- the knowledge sync --------------------------------------------------------------------------


@router.post("/api/{assistant}/sync-knowledge")
async def sync_knowledge(
    request: Request,
    web: WebDep,
    assistant: str,
    body: SyncBody,
    principal: SignedInWrite,
    wait: Annotated[
        bool, Query(description="false: start the sync and answer 202 at once.")
    ] = True,
) -> JSONResponse:
    """Run the customer's knowledge sync (dry run or commit); counters, or the job to poll."""
    student_id = await resolve_assistant(web, principal, assistant)
    ready_for_sync(await web.customers.context(student_id))
    jobs = web.sync_jobs
    async with console_action(
        web, principal, "knowledge.sync", student_id=student_id, details={"commit": body.commit}
    ):
        try:
            if wait:
                outcome = await jobs.run_sync_within(
                    student_id, commit=body.commit, max_duration_s=web.settings.sync_max_duration_s
                )
                job = outcome.job
            else:
                job = await jobs.status(await jobs.start(student_id, commit=body.commit))
        except Conflict as error:
            if error.code != "sync_already_running":
                raise
            active = await jobs.repo.active_job(student_id)
            if active is None:
                raise
            raise JobError(error, active.id, _status_url(request, assistant, active.id)) from None
    status_url = _status_url(request, assistant, job.id)
    if job.active:
        return _running(job, status_url)
    return _finished(job, status_url)


@router.get("/api/{assistant}/sync-knowledge")
async def latest_sync(
    request: Request, web: WebDep, assistant: str, principal: SignedIn
) -> JSONResponse:
    """The customer's most recent sync job."""
    student_id = await resolve_assistant(web, principal, assistant)
    job = await web.sync_jobs.latest(student_id)
    if job is None:
        raise PmsgateError(
            f"No knowledge sync has run for {assistant}.",
            code="sync_job_not_found",
            status=404,
            hint="Start one with POST on this URL.",
        )
    return _job(request, assistant, job)


@router.get("/api/{assistant}/sync-knowledge/{job_id}")
async def sync_job(
    request: Request, web: WebDep, assistant: str, job_id: str, principal: SignedIn
) -> JSONResponse:
    """One sync job of the customer: status, progress, counters, error."""
    student_id = await resolve_assistant(web, principal, assistant)
    job = await web.sync_jobs.status(job_id)
    if job.student_id != student_id:
        # Another customer's job is as unknown as a job that does not exist.
        raise job_not_found(job_id)
    return _job(request, assistant, job)


def _job(request: Request, assistant: str, job: SyncJobView) -> JSONResponse:
    return JSONResponse(
        {**job_summary(job), "statusUrl": _status_url(request, assistant, job.id)},
        headers=NO_STORE,
    )


# --- the booking-system reconnect ----------------------------------------------------------------

# Declared before /api/{assistant}/kross/connect: the literal path must win over the pattern.


@router.put("/api/admin/kross/connect")
async def admin_connect(web: WebDep, body: AdminConnectBody, principal: AdminWrite) -> JSONResponse:
    """Platform admin: a customer's new booking-system credentials (docs/requirements.md R11.4)."""
    given = [value for value in (body.student_id, body.assistant) if value and value.strip()]
    if len(given) != 1:
        raise InvalidInput(
            "Name the customer with exactly one of studentId or assistant.",
            code="customer_required",
            hint='Send {"studentId": "…"} or {"assistant": "<workspace slug>"}.',
        )
    if body.student_id and body.student_id.strip():
        customer = await web.customers.customers.find(body.student_id)
        if customer is None:
            raise customer_not_found(body.student_id.strip())
        student_id = customer.student_id
    else:
        assert body.assistant is not None
        student_id = await resolve_assistant(web, principal, body.assistant)
    return await _connect(web, principal, student_id, body)


@router.put("/api/{assistant}/kross/connect")
async def connect(
    web: WebDep, assistant: str, body: ConnectBody, principal: SignedInWrite
) -> JSONResponse:
    """The customer's own reconnect (an admin may do it too): same rules, same answer."""
    student_id = await resolve_assistant(web, principal, assistant)
    return await _connect(web, principal, student_id, body)


async def _connect(
    web: WebServices, principal: Principal, student_id: str, body: ConnectBody
) -> JSONResponse:
    async with console_action(
        web,
        principal,
        "kross.reconnect",
        student_id=student_id,
        details={"username": body.username},
    ):
        result = await connect_kross(
            web.customers,
            web.gateway,
            student_id,
            username=body.username,
            password=body.password,
            api_key=body.api_key,
            hotel_id=body.hotel_id,
            actor=actor_of(principal),
        )
    return JSONResponse(result.as_json(), headers=NO_STORE)


# --- status --------------------------------------------------------------------------------------


@router.get("/api/{assistant}/status")
async def status(web: WebDep, assistant: str, principal: SignedIn) -> JSONResponse:
    """What the console polls: integration states, registry listings, the latest sync."""
    student_id = await resolve_assistant(web, principal, assistant)
    ctx = await web.customers.context(student_id)
    latest = await web.sync_jobs.latest(student_id)
    kross = None
    if ctx.kross is not None:
        kross = {
            "provider": ctx.kross.provider,
            "integrationId": ctx.kross.id,
            "hotelId": ctx.kross.facility_hotel_id,
            "status": ctx.kross.status,
            "lastError": ctx.kross.last_error,
            "statusChangedAt": ctx.kross.status_changed_at.isoformat(),
        }
    notes = None
    if ctx.notes is not None:
        notes = {
            "status": ctx.notes.status,
            "lastError": ctx.notes.last_error,
            "statusChangedAt": ctx.notes.status_changed_at.isoformat(),
        }
    return JSONResponse(
        {
            "studentId": ctx.student_id,
            "assistant": ctx.workspace.workspace_slug if ctx.workspace else ctx.student_id,
            "workspaceId": ctx.workspace_id,
            "pms": kross,
            "notes": notes,
            "apartments": len(ctx.apartments),
            "listings": sum(1 for a in ctx.apartments if a.assistant_listing_id is not None),
            "latestSync": job_summary(latest) if latest is not None else None,
        },
        headers=NO_STORE,
    )
