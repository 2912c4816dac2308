"""Steps 6 and 7 (docs/requirements.md R21.6, R21.7): the six custom tools, the guest agent.

Everything is provisioned **from the catalogue** (:func:`pmsgate.catalogue.load_catalogue`),
never copied from another workspace, and every ``check`` reads the platform back:

- **6 custom tools.** Exactly the catalogue's six tools exist in the workspace with
  ``enable_globally`` true and the catalogue's definition (description, language,
  code, parameters, execution message). A missing tool is created, a drifted one is
  updated in place (only the fields that differ). Tools that are not the catalogue's
  are **never deleted**: they may be the customer's own; the evidence lists them, and
  flags those that read our gateway secrets (an old or renamed copy of ours).
  The tools' code reads two workspace secrets (names from the catalogue): the gateway's
  public URL (``PMSGATE_GATEWAY_PUBLIC_URL``) and a gateway key of the customer's
  facility. The key is minted by the gateway only when the secret is absent (or its key
  was revoked), labelled ``platform-secret:<workspace>``; the raw key goes into the
  platform secret and nowhere else (the evidence holds its display prefix).
- **7 guest agent.** The catalogue's agent: ``copilot``, enabled, ``response_language``
  ``Original`` (the escalation language is the escalation-language guardrail, never
  this field), the trigger on guest inbox messages, every catalogue guardrail (at
  least 21), and the customer's skills (the three standard ones, plus
  ``payment-link-generator`` when the customer handles upsell or late check-in
  autonomously), created from the catalogue when missing. Skills and guardrails the
  customer added are kept; a catalogue guardrail that was edited is restored.

**Idempotency keys** on every platform write are derived from the workspace, the
object's name, what is written, and the onboarding run: a client retry of one write
reuses its key, while a later run never gets the replay of an older answer (the
platform replays a key for as long as it keeps it, so a key reused after the state
moved back — a tool deleted, then recreated — would answer "created" without creating).
Duplicates across runs cannot happen anyway: names are unique per workspace (409),
and a 409 is answered by reading the workspace again.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog
from pydantic import SecretStr

from pmsgate.catalogue import Catalogue, CustomerProfile, load_catalogue
from pmsgate.customers.service import upstream_error, workspace_not_created
from pmsgate.errors import ConfigurationError, PmsgateError
from pmsgate.gateway.facilities import KeyView
from pmsgate.gateway.scopes import TOOLS_READ
from pmsgate.integrations.assistant.client import (
    Agent,
    AgentUpdate,
    CustomTool,
    CustomToolUpdate,
    Guardrail,
    NewAgent,
    NewCustomTool,
    NewSkill,
    Skill,
)
from pmsgate.integrations.assistant.errors import AssistantConflict, AssistantError
from pmsgate.onboarding.person_tasks import ENDPOINT_UNAVAILABLE, person_task
from pmsgate.onboarding.steps import (
    BOTH_ROUTES,
    ONBOARDING_ACTOR,
    OnboardingContext,
    PersonTask,
    Step,
    StepKind,
    StepResult,
)
from pmsgate.onboarding.steps_setup import ensure_facility

log = structlog.get_logger(__name__)

Created = TypeVar("Created")

# The fields of a custom tool the catalogue defines (``custom_tool_body`` minus workspace_id).
TOOL_FIELDS = (
    "description",
    "language",
    "code",
    "parameters",
    "execution_message_description",
    "enable_globally",
)
KEY_LABEL_PREFIX = "platform-secret:"


# --- shared helpers ----------------------------------------------------------------------------


def catalogue() -> Catalogue:
    """The packaged catalogue (validated and linted once per process)."""
    return load_catalogue()


def idempotency_key(ctx: OnboardingContext, kind: str, *parts: str) -> str:
    """A write's Idempotency-Key: same run, kind and parts → same key (see the module doc)."""
    run = ctx.run.idempotency_run
    if run is None:
        run = ctx.run.idempotency_run = ctx.run_id or uuid.uuid4().hex
    digest = hashlib.sha256("\x1f".join((run, kind, *parts)).encode()).hexdigest()
    return f"pmsgate-onb-{kind}-{digest[:40]}"


def digest_of(value: Any) -> str:
    """A short content digest (never of a secret) for idempotency keys and evidence."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@asynccontextmanager
async def assistant_errors(action: str) -> AsyncIterator[None]:
    """Turn a platform failure into the service's error (its code and hint kept)."""
    try:
        yield
    except AssistantError as error:
        raise upstream_error(error, action) from None


async def workspace_id_of(ctx: OnboardingContext) -> str | None:
    """The customer's platform workspace id, once step 5 recorded it."""
    config = await ctx.customers.workspaces.find(ctx.student_id)
    return config.workspace_id if config is not None else None


async def require_workspace(ctx: OnboardingContext) -> str:
    """The workspace id, or the error saying step 5 has not run."""
    workspace_id = await workspace_id_of(ctx)
    if workspace_id is None:
        raise workspace_not_created(ctx.student_id)
    return workspace_id


def gateway_url(ctx: OnboardingContext) -> str | None:
    """The gateway's public URL the custom tools call (PMSGATE_GATEWAY_PUBLIC_URL)."""
    url = (ctx.settings.gateway_public_url or "").strip().rstrip("/")
    return url or None


def _gateway_url_required(ctx: OnboardingContext) -> str:
    url = gateway_url(ctx)
    if url is None:
        raise ConfigurationError(
            "PMSGATE_GATEWAY_PUBLIC_URL is not set: the custom tools would not know where the "
            "gateway is.",
            code="gateway_public_url_missing",
            hint="Set PMSGATE_GATEWAY_PUBLIC_URL to the gateway's base URL as the assistant "
            "platform reaches it (https://…), then run onboarding again.",
        )
    return url


# --- custom tools ------------------------------------------------------------------------------


def wanted_tool(name: str, workspace_id: str) -> dict[str, Any]:
    """The catalogue's ``POST /v1/custom-tools`` body of one tool."""
    return catalogue().tools[name].custom_tool_body(workspace_id)


def _parameters_of(tool: CustomTool) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "type": p.type,
            "required": p.required,
            "description": p.description,
        }
        for name, p in tool.parameters.items()
    }


def tool_drift(tool: CustomTool, wanted: Mapping[str, Any]) -> list[str]:
    """The catalogue fields in which a platform tool differs from the catalogue."""
    differs = []
    for name in TOOL_FIELDS:
        current: Any = _parameters_of(tool) if name == "parameters" else getattr(tool, name)
        if current != wanted[name]:
            differs.append(name)
    return differs


def _looks_like_ours(tool: CustomTool) -> bool:
    return any(name in tool.code for name in secret_names()) or "pmsgate-custom-tool" in tool.code


def secret_names() -> tuple[str, str]:
    """The workspace secrets the tools' code reads: (gateway URL, gateway key)."""
    runtime = next(iter(catalogue().tools.values())).custom_tool
    assert runtime is not None  # bound by the catalogue loader
    return runtime.settings.url_secret, runtime.settings.key_secret


def key_label(workspace_id: str) -> str:
    """The label of the gateway key stored in this workspace's secrets."""
    return f"{KEY_LABEL_PREFIX}{workspace_id}"


@dataclass
class ToolsState:
    """What step 6 finds on the platform and in the gateway (never a secret value)."""

    workspace_id: str
    hotel_id: str | None
    tools: dict[str, CustomTool] = field(default_factory=dict)  # catalogue name -> tool
    missing: list[str] = field(default_factory=list)
    drifted: dict[str, list[str]] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)
    pmsgate_like: list[str] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    # The platform offers no secrets API (an assumed endpoint it refused): a person's task.
    secrets_by_person: bool = False
    active_key: KeyView | None = None
    stale_keys: list[KeyView] = field(default_factory=list)

    @property
    def url_secret_set(self) -> bool:
        """The gateway-URL secret exists."""
        return secret_names()[0] in self.secrets

    @property
    def key_secret_ok(self) -> bool:
        """The gateway-key secret exists and its key (ours, labelled) is active."""
        return secret_names()[1] in self.secrets and self.active_key is not None

    @property
    def done(self) -> bool:
        """Every catalogue tool as defined, both secrets in place."""
        return (
            not self.missing
            and not self.drifted
            and self.url_secret_set
            and self.key_secret_ok
            and self.hotel_id is not None
        )

    def problems(self) -> list[str]:
        """What is not done, in words."""
        out = []
        if self.missing:
            out.append("missing tools: " + ", ".join(self.missing))
        for name, fields in self.drifted.items():
            out.append(f"{name} differs from the catalogue in {', '.join(fields)}")
        if self.hotel_id is None:
            out.append("no gateway facility is linked to the customer's kross row")
        if not self.url_secret_set:
            out.append(f"secret {secret_names()[0]} not set")
        if secret_names()[1] not in self.secrets:
            out.append(f"secret {secret_names()[1]} not set")
        elif self.active_key is None and self.hotel_id is not None:
            out.append(f"secret {secret_names()[1]} holds no active gateway key of ours")
        return out

    def evidence(self, ctx: OnboardingContext) -> dict[str, Any]:
        """JSON-ready evidence: ids, names, the key prefix; never a secret."""
        return {
            "workspace_id": self.workspace_id,
            "catalogue_version": catalogue().version,
            "tools": {name: tool.id for name, tool in sorted(self.tools.items())},
            "enable_globally": all(t.enable_globally for t in self.tools.values()),
            "missing": list(self.missing),
            "drifted": {k: list(v) for k, v in self.drifted.items()},
            "foreign_tools": list(self.foreign),
            "foreign_tools_reading_our_secrets": list(self.pmsgate_like),
            "secrets": sorted(n for n in self.secrets if n in secret_names()),
            "gateway_url": gateway_url(ctx),
            "hotel_id": self.hotel_id,
            "gateway_key_prefix": self.active_key.prefix if self.active_key else None,
        }


async def inspect_tools(
    ctx: OnboardingContext, workspace_id: str, hotel_id: str | None
) -> ToolsState:
    """Read the workspace's tools and secret names, and the facility's keys (reads only)."""
    state = ToolsState(workspace_id=workspace_id, hotel_id=hotel_id)
    assistant = ctx.customers.assistant
    async with assistant_errors("reading the custom tools"):
        tools = await assistant.list_custom_tools(workspace_id)
    try:
        async with assistant_errors("reading the workspace secrets"):
            state.secrets = {s.name for s in await assistant.list_secrets(workspace_id)}
    except PmsgateError as error:
        if error.code != ENDPOINT_UNAVAILABLE:
            raise
        # Workspace secrets are not in the public API: a person sets them in the dashboard
        # (docs/assistant-api.md "Assumed endpoints"); the tools are still ours to create.
        state.secrets_by_person = True
        if ctx.manual_evidence.get(CUSTOM_TOOLS.id):
            state.secrets = set(secret_names())
    by_name = {t.name: t for t in tools}
    for name in catalogue().tools:
        tool = by_name.get(name)
        if tool is None:
            state.missing.append(name)
            continue
        state.tools[name] = tool
        drift = tool_drift(tool, wanted_tool(name, workspace_id))
        if drift:
            state.drifted[name] = drift
    for tool in tools:
        if tool.name not in catalogue().tools:
            state.foreign.append(tool.name)
            if _looks_like_ours(tool):
                state.pmsgate_like.append(tool.name)
    if hotel_id is not None:
        label = key_label(workspace_id)
        keys = await ctx.facilities.list_keys(hotel_id)
        ours = [k for k in keys if k.label == label and k.revoked_at is None]
        # The newest labelled key is the one in the secret; older active ones are leftovers.
        ours.sort(key=lambda k: (k.created_at, k.id))
        state.active_key = ours[-1] if ours else None
        state.stale_keys = ours[:-1]
    return state


async def _hotel_id(ctx: OnboardingContext) -> str | None:
    customer = await ctx.customer_context()
    return customer.hotel_id


async def check_custom_tools(ctx: OnboardingContext) -> StepResult:
    """Exactly the six catalogue tools, enabled globally, and both gateway secrets."""
    workspace_id = await workspace_id_of(ctx)
    if workspace_id is None:
        return StepResult(done=False, message="no workspace yet (step 5)")
    state = await inspect_tools(ctx, workspace_id, await _hotel_id(ctx))
    evidence = state.evidence(ctx)
    if state.secrets_by_person and not state.missing and not state.drifted:
        if not ctx.manual_evidence.get(CUSTOM_TOOLS.id):
            task = person_task(ctx, CUSTOM_TOOLS, "no API for workspace secrets")
            return StepResult(
                done=False,
                evidence={**evidence, **task.evidence},
                message=task.message,
                waiting_for=task.waiting_for,
                fix=task.fix,
            )
        evidence["secrets_confirmed_by_person"] = True
        return StepResult(
            done=True,
            evidence=evidence,
            message=(
                f"the {len(state.tools)} catalogue tools (v{catalogue().version}) enabled "
                "globally; the gateway secrets set by a person (no secrets API)"
            ),
        )
    if not state.done:
        return StepResult(done=False, evidence=evidence, message="; ".join(state.problems()))
    foreign = (
        f"; {len(state.foreign)} other tool(s) left as they are: {', '.join(state.foreign)}"
        if state.foreign
        else ""
    )
    return StepResult(
        done=True,
        evidence=evidence,
        message=(
            f"the {len(state.tools)} catalogue tools (v{catalogue().version}) enabled globally; "
            f"gateway URL and key (prefix {evidence['gateway_key_prefix']}) in the workspace "
            f"secrets{foreign}"
        ),
    )


async def ensure_gateway_secrets(
    ctx: OnboardingContext, workspace_id: str, hotel_id: str, state: ToolsState
) -> None:
    """Store the gateway URL and a gateway key of ``hotel_id`` as workspace secrets, if absent."""
    assistant = ctx.customers.assistant
    url_secret, key_secret = secret_names()
    if state.secrets_by_person:
        return  # no API to write them: the step asks a person (check_custom_tools)
    if not state.url_secret_set:
        url = _gateway_url_required(ctx)
        async with assistant_errors(f"storing the secret {url_secret}"):
            await assistant.set_secret(
                workspace_id,
                url_secret,
                SecretStr(url),
                idempotency_key=idempotency_key(ctx, "secret", workspace_id, url_secret, url),
            )
    if state.key_secret_ok:
        return
    # The raw key of any earlier labelled key is lost (it lived only in the secret): revoke.
    for stale in [*state.stale_keys, *([state.active_key] if state.active_key else [])]:
        await ctx.facilities.revoke_key(hotel_id, stale.id, actor=ONBOARDING_ACTOR)
    # The workspace's assistant only needs the six tools: exactly tools:read, never an
    # operation or a write (least privilege, docs/gateway.md, Scopes).
    view, raw = await ctx.facilities.mint_key(
        hotel_id, key_label(workspace_id), scopes=[TOOLS_READ], actor=ONBOARDING_ACTOR
    )
    try:
        async with assistant_errors(f"storing the secret {key_secret}"):
            await assistant.set_secret(
                workspace_id,
                key_secret,
                SecretStr(raw),
                idempotency_key=idempotency_key(
                    ctx, "secret", workspace_id, key_secret, view.prefix
                ),
            )
    except PmsgateError:
        # Nobody holds the raw key now: a key that exists nowhere must not stay valid.
        await ctx.facilities.revoke_key(hotel_id, view.id, actor=ONBOARDING_ACTOR)
        raise
    finally:
        del raw
    log.info(
        "onboarding_gateway_key_stored",
        workspace_id=workspace_id,
        hotel_id=hotel_id,
        key_prefix=view.prefix,
    )


async def ensure_catalogue_tools(
    ctx: OnboardingContext, workspace_id: str, state: ToolsState
) -> None:
    """Create the missing catalogue tools and restore drifted ones (never deletes a tool)."""
    assistant = ctx.customers.assistant
    for name in state.missing:
        body = wanted_tool(name, workspace_id)

        async def create(key: str, body: dict[str, Any] = body) -> CustomTool:
            return await assistant.create_custom_tool(
                NewCustomTool.model_validate(body), idempotency_key=key
            )

        async def existing(name: str = name, body: dict[str, Any] = body) -> CustomTool:
            # Created meanwhile (another run): compare it like any existing tool.
            tool = _named(await assistant.list_custom_tools(workspace_id), name)
            drift = tool_drift(tool, body)
            if drift:
                state.drifted[name] = drift
            return tool

        state.tools[name] = await _create_once(
            ctx, "custom tool", workspace_id, name, body, create, existing
        )
    for name, fields in state.drifted.items():
        tool = state.tools[name]
        body = wanted_tool(name, workspace_id)
        changes = CustomToolUpdate.model_validate({f: body[f] for f in fields})
        async with assistant_errors(f"restoring the custom tool {name}"):
            await assistant.update_custom_tool(
                tool.id,
                changes,
                workspace_id=workspace_id,
                idempotency_key=idempotency_key(
                    ctx, "tool-update", workspace_id, name, tool.id, digest_of(body)
                ),
            )
        log.info("onboarding_tool_restored", workspace_id=workspace_id, tool=name, fields=fields)


async def _create_once(
    ctx: OnboardingContext,
    what: str,
    workspace_id: str,
    name: str,
    body: dict[str, Any],
    create: Callable[[str], Awaitable[Created]],
    existing: Callable[[], Awaitable[Created]],
) -> Created:
    """Create the ``what`` called ``name`` from ``body`` (one Idempotency-Key per run and body);
    the existing one when the platform says it exists already (409: created meanwhile)."""
    kind = what.split()[-1]  # "custom tool" → "tool", as the keys have always said
    async with assistant_errors(f"creating the {what} {name}"):
        try:
            return await create(
                idempotency_key(ctx, f"{kind}-create", workspace_id, name, digest_of(body))
            )
        except AssistantConflict:
            return await existing()


def _named(items: Sequence[Any], name: str) -> Any:
    """The item called ``name`` after a 409 said it exists; an error if it is not listed."""
    found = next((item for item in items if item.name == name), None)
    if found is None:
        raise PmsgateError(
            f"The platform says {name} exists but does not list it.",
            code="platform_unexpected_response",
            status=502,
            hint="Retry later; if it persists, check the workspace on the platform.",
        )
    return found


async def provision_workspace_tools(
    ctx: OnboardingContext, workspace_id: str, hotel_id: str
) -> ToolsState:
    """Secrets and tools as the catalogue says, writing only what differs; the state after."""
    state = await inspect_tools(ctx, workspace_id, hotel_id)
    await ensure_gateway_secrets(ctx, workspace_id, hotel_id, state)
    await ensure_catalogue_tools(ctx, workspace_id, state)
    return await inspect_tools(ctx, workspace_id, hotel_id)


async def apply_custom_tools(ctx: OnboardingContext) -> None:
    """Register the facility if needed, store the secrets, create or restore the six tools."""
    workspace_id = await require_workspace(ctx)
    facility = await ensure_facility(ctx)
    await provision_workspace_tools(ctx, workspace_id, facility.hotel_id)


async def describe_custom_tools(ctx: OnboardingContext) -> str:
    """What apply_custom_tools would do."""
    workspace_id = await workspace_id_of(ctx)
    if workspace_id is None:
        return (
            "create the six catalogue tools (enable_globally) in the new workspace and store the "
            "gateway URL and a new gateway key as workspace secrets"
        )
    state = await inspect_tools(ctx, workspace_id, await _hotel_id(ctx))
    actions = []
    if state.missing:
        actions.append("create " + ", ".join(state.missing))
    if state.drifted:
        actions.append("restore " + ", ".join(state.drifted))
    if not state.url_secret_set:
        actions.append(f"store {secret_names()[0]} = {gateway_url(ctx) or '(not configured)'}")
    if not state.key_secret_ok:
        actions.append(f"mint a gateway key and store it as {secret_names()[1]}")
    return "; ".join(actions) or "nothing: the six tools and both secrets are in place"


# --- guest agent -------------------------------------------------------------------------------


def skill_profile(ctx: OnboardingContext) -> CustomerProfile:
    """The catalogue profile of the customer: what it handles autonomously."""
    autonomy = ctx.file.autonomy
    return CustomerProfile(
        upsell_autonomous=autonomy.handles_upsell,
        late_checkin_autonomous=autonomy.handles_late_check_in,
    )


def required_skill_names(ctx: OnboardingContext) -> list[str]:
    """The skills the customer's guest agent must have, in catalogue order."""
    return [s.name for s in catalogue().skills_for(skill_profile(ctx))]


def agent_record(agent: Agent) -> dict[str, Any]:
    """An agent as the platform's JSON (what the catalogue's check reads)."""
    return agent.model_dump(mode="json", by_alias=True)


def wanted_guardrails(current: Sequence[Guardrail]) -> list[dict[str, str]]:
    """The catalogue's guardrails in order, then the ones the customer added (kept)."""
    ours = [g.assistant_body() for g in catalogue().guardrails]
    titles = {g["title"] for g in ours}
    knowledge = {g["knowledge"] for g in ours}
    extra = [
        {"title": g.title, "knowledge": g.knowledge}
        for g in current
        if g.title not in titles and g.knowledge not in knowledge
    ]
    return ours + extra


def _triggers_ok(agent: Agent) -> bool:
    return any(
        t.enabled and t.type == "message" and t.config.inbox_type_id == "guest"
        for t in agent.triggers
    )


@dataclass
class AgentState:
    """What step 7 finds: the skills by name and the guest agent with its differences."""

    workspace_id: str
    skills: dict[str, Skill] = field(default_factory=dict)
    missing_skills: list[str] = field(default_factory=list)
    disabled_skills: list[str] = field(default_factory=list)
    agent: Agent | None = None
    changes: dict[str, Any] = field(default_factory=dict)  # AgentUpdate fields to set
    problems: list[str] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """Agent present, nothing to change, every skill present and enabled."""
        return (
            self.agent is not None
            and not self.changes
            and not self.problems
            and not self.missing_skills
            and not self.disabled_skills
        )


def agent_changes(agent: Agent, skill_ids: Sequence[str]) -> dict[str, Any]:
    """The fields to PATCH so the agent is the catalogue's, with these skills attached."""
    definition = catalogue().agent
    changes: dict[str, Any] = {}
    if agent.operation_mode != definition.operation_mode:
        changes["operation_mode"] = definition.operation_mode
    if agent.enabled is not True:
        changes["enabled"] = True
    if agent.response_language != definition.response_language:
        # Always "Original": the escalation language lives in a guardrail, never here.
        changes["response_language"] = definition.response_language
    if agent.description != definition.description:
        changes["description"] = definition.description
    if agent.instructions != definition.instructions:
        changes["instructions"] = definition.instructions
    guardrails = wanted_guardrails(agent.guardrails)
    if [{"title": g.title, "knowledge": g.knowledge} for g in agent.guardrails] != guardrails:
        changes["guardrails"] = guardrails
    attached = list(agent.skill_ids) + [s for s in skill_ids if s not in agent.skill_ids]
    if attached != list(agent.skill_ids):
        changes["skill_ids"] = attached
    if not _triggers_ok(agent):
        kept = [t.model_dump(mode="json", by_alias=True) for t in agent.triggers]
        changes["triggers"] = kept + [t.model_dump(mode="json") for t in definition.triggers]
    return changes


async def inspect_agent(ctx: OnboardingContext, workspace_id: str) -> AgentState:
    """Read the workspace's skills and the guest agent (reads only)."""
    state = AgentState(workspace_id=workspace_id)
    assistant = ctx.customers.assistant
    async with assistant_errors("reading the skills and agents"):
        skills = {s.name: s for s in await assistant.list_skills(workspace_id)}
        agents = await assistant.list_agents(workspace_id)
    for name in required_skill_names(ctx):
        skill = skills.get(name)
        if skill is None:
            state.missing_skills.append(name)
        else:
            state.skills[name] = skill
            if not skill.enabled:
                state.disabled_skills.append(name)
    state.agent = next((a for a in agents if a.name == catalogue().agent.name), None)
    if state.agent is not None:
        skill_ids = [s.id for s in state.skills.values()]
        state.changes = agent_changes(state.agent, skill_ids)
        state.problems = catalogue().agent_problems(agent_record(state.agent), skill_ids)
    return state


def _agent_evidence(ctx: OnboardingContext, state: AgentState) -> dict[str, Any]:
    agent = state.agent
    names = {s.id: n for n, s in state.skills.items()}
    return {
        "workspace_id": state.workspace_id,
        "agent_id": agent.id if agent else None,
        "agent_name": catalogue().agent.name,
        "operation_mode": agent.operation_mode if agent else None,
        "enabled": agent.enabled if agent else None,
        "response_language": agent.response_language if agent else None,
        "guardrails": len(agent.guardrails) if agent else 0,
        "escalation_guardrail": catalogue().escalation_guardrail.id,
        "guest_inbox_trigger": _triggers_ok(agent) if agent else False,
        "skills": {n: s.id for n, s in state.skills.items()},
        "skills_attached": [names.get(i, i) for i in agent.skill_ids] if agent else [],
        "required_skills": required_skill_names(ctx),
        "missing_skills": list(state.missing_skills),
        "disabled_skills": list(state.disabled_skills),
        "to_change": sorted(state.changes),
        "problems": list(state.problems),
    }


async def check_guest_agent(ctx: OnboardingContext) -> StepResult:
    """The guest agent read back: copilot, enabled, Original, skills, ≥21 guardrails, trigger."""
    workspace_id = await workspace_id_of(ctx)
    if workspace_id is None:
        return StepResult(done=False, message="no workspace yet (step 5)")
    state = await inspect_agent(ctx, workspace_id)
    evidence = _agent_evidence(ctx, state)
    if state.agent is None:
        missing = f" (skills missing: {', '.join(state.missing_skills)})"
        return StepResult(
            done=False,
            evidence=evidence,
            message="no guest agent" + (missing if state.missing_skills else ""),
        )
    if state.disabled_skills:
        return StepResult(
            done=False,
            evidence=evidence,
            message="skills disabled on the platform: " + ", ".join(state.disabled_skills),
            fix="enable the skills in the platform's workspace (the API cannot change a skill)",
        )
    if not state.done:
        reasons = [*state.problems]
        if state.missing_skills:
            reasons.append("skills missing: " + ", ".join(state.missing_skills))
        other = sorted(set(state.changes) - {"skill_ids"})
        if other and not state.problems:
            reasons.append("differs from the catalogue in " + ", ".join(other))
        return StepResult(done=False, evidence=evidence, message="; ".join(reasons))
    agent = state.agent
    return StepResult(
        done=True,
        evidence=evidence,
        message=(
            f"guest agent {agent.id}: copilot, enabled, response language Original, "
            f"{len(agent.guardrails)} guardrails (escalation in Italian), skills "
            + ", ".join(state.skills)
        ),
    )


async def ensure_skills(ctx: OnboardingContext, workspace_id: str, state: AgentState) -> None:
    """Create the customer's missing skills from the catalogue."""
    assistant = ctx.customers.assistant
    for name in list(state.missing_skills):
        body = catalogue().skills[name].assistant_body(workspace_id)

        async def create(key: str, body: dict[str, Any] = body) -> Skill:
            return await assistant.create_skill(NewSkill.model_validate(body), idempotency_key=key)

        async def existing(name: str = name) -> Skill:
            skill: Skill = _named(await assistant.list_skills(workspace_id), name)
            return skill

        state.skills[name] = await _create_once(
            ctx, "skill", workspace_id, name, body, create, existing
        )
        state.missing_skills.remove(name)


async def apply_guest_agent(ctx: OnboardingContext) -> None:
    """Create the missing skills, then create the guest agent or bring it to the catalogue's."""
    workspace_id = await require_workspace(ctx)
    state = await inspect_agent(ctx, workspace_id)
    await ensure_skills(ctx, workspace_id, state)
    skill_ids = [s.id for s in state.skills.values()]
    assistant = ctx.customers.assistant
    agent = state.agent
    if agent is None:
        body = catalogue().agent_body(workspace_id, skill_ids)
        async with assistant_errors("creating the guest agent"):
            try:
                await assistant.create_agent(
                    NewAgent.model_validate(body),
                    idempotency_key=idempotency_key(
                        ctx, "agent-create", workspace_id, catalogue().agent.name, digest_of(body)
                    ),
                )
                return
            except AssistantConflict:
                agent = _named(await assistant.list_agents(workspace_id), catalogue().agent.name)
    changes = agent_changes(agent, skill_ids)
    if not changes:
        return
    async with assistant_errors("updating the guest agent"):
        await assistant.update_agent(
            agent.id,
            AgentUpdate.model_validate(changes),
            workspace_id=workspace_id,
            idempotency_key=idempotency_key(
                ctx, "agent-update", workspace_id, agent.id, digest_of(changes)
            ),
        )
    log.info("onboarding_agent_updated", workspace_id=workspace_id, fields=sorted(changes))


async def describe_guest_agent(ctx: OnboardingContext) -> str:
    """What apply_guest_agent would do."""
    skills = ", ".join(required_skill_names(ctx))
    workspace_id = await workspace_id_of(ctx)
    if workspace_id is None:
        return f"create the skills {skills} and the guest agent (copilot, Original)"
    state = await inspect_agent(ctx, workspace_id)
    actions = []
    if state.missing_skills:
        actions.append("create skills " + ", ".join(state.missing_skills))
    if state.agent is None:
        actions.append(
            f"create the guest agent (copilot, enabled, Original, "
            f"{len(catalogue().guardrails)} guardrails, skills {skills})"
        )
    elif state.changes:
        actions.append("update the guest agent: " + ", ".join(sorted(state.changes)))
    return "; ".join(actions) or "nothing: the guest agent is configured"


CUSTOM_TOOLS = Step(
    number=6,
    id="custom-tools",
    title="The six custom tools, gateway key secret",
    kind=StepKind.AUTO,
    routes=BOTH_ROUTES,
    check=check_custom_tools,
    apply=apply_custom_tools,
    describe=describe_custom_tools,
    by_hand=PersonTask(
        "In the platform dashboard, add the workspace secrets the custom tools read: the "
        "gateway URL and a gateway key minted for this workspace (`pmsgate gateway "
        "facilities mint-key HOTEL_ID --label pmsgate-workspace:WORKSPACE_ID`); the tools "
        "themselves are created by the runbook.",
        "the two secret names and the gateway key's prefix (never the key)",
    ),
)
GUEST_AGENT = Step(
    number=7,
    id="guest-agent",
    title="Guest agent configured",
    kind=StepKind.AUTO,
    routes=BOTH_ROUTES,
    check=check_guest_agent,
    apply=apply_guest_agent,
    describe=describe_guest_agent,
)
