"""The customer as a service: its records in one snapshot, and the upstream clients it runs on.

:class:`CustomerServices` is ``container.customers``, built once per process by
:func:`pmsgate.container.open_container` (the process's one engine, its vault and
facility service, one shared assistant-platform client), and is what the knowledge
bridge, onboarding and the CLI take. :meth:`CustomerServices.context` reads
everything stored about one customer into a frozen :class:`CustomerContext`;
:meth:`CustomerServices.notes` opens a notes client on the customer's own
integration token, decrypted only for the life of that client.

One seam per upstream: every httpx client comes from the injected ``http_factory``
(tests, the demo and the sandbox pass one whose transport is the emulators' ASGI
app; production passes nothing and gets real clients).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import httpx
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from pmsgate.clock import Clock
from pmsgate.config import Settings
from pmsgate.customers.allowlist import Allowlist
from pmsgate.customers.apartments import Apartments
from pmsgate.customers.checks import customer_not_found
from pmsgate.customers.integrations import CustomerIntegrations
from pmsgate.customers.registry import Customers
from pmsgate.customers.usage import UsageSnapshots
from pmsgate.customers.workspaces import Workspaces
from pmsgate.errors import ConfigurationError, Conflict
from pmsgate.gateway.facility_service import FacilityService
from pmsgate.gateway.vault import Vault
from pmsgate.integrations.assistant.client import AssistantClient
from pmsgate.integrations.notion.client import NotionClient
from pmsgate.integrations.notion.throttle import NotionThrottle
from pmsgate.storage.apartments import ApartmentView
from pmsgate.storage.customers import CustomerView
from pmsgate.storage.integrations import IntegrationView, token_context
from pmsgate.storage.workspaces import WorkspaceConfigurationView

Sleep = Callable[[float], Awaitable[None]]
HttpFactory = Callable[[], httpx.AsyncClient]

KROSS_PROVIDER = "kross"
NOTION_PROVIDER = "notes"


@dataclass(frozen=True)
class CustomerContext:
    """Everything stored about one customer, read at one moment (never a token)."""

    student_id: str
    customer: CustomerView
    workspace_id: str | None
    kross: IntegrationView | None
    notes: IntegrationView | None
    apartments: list[ApartmentView]
    workspace: WorkspaceConfigurationView | None = None

    @property
    def kross_connected(self) -> bool:
        """True when the booking-system integration row exists and is ``connected``."""
        return self.kross is not None and self.kross.status == "connected"

    @property
    def notes_connected(self) -> bool:
        """True when a notes integration is ``connected`` with a stored token."""
        return self.notes is not None and self.notes.status == "connected" and self.notes.has_token

    @property
    def apartments_database_id(self) -> str | None:
        """The notes apartments database id, if a notes integration records one."""
        return self.notes.apartments_database_id if self.notes is not None else None

    @property
    def hotel_id(self) -> str | None:
        """The hotel_id of the gateway facility the booking-system row is linked to."""
        return self.kross.facility_hotel_id if self.kross is not None else None


class NotionNotConnected(Conflict):
    """The customer has no notes integration with a stored token."""

    code = "notes_not_connected"
    hint = (
        "Connect the notes workspace first: `pmsgate customers connect-notion STUDENT "
        "--database-id … --token-stdin`."
    )


def default_http_factory() -> httpx.AsyncClient:
    """A real httpx client (production); each upstream client gets its own."""
    return httpx.AsyncClient(timeout=httpx.Timeout(30.0), follow_redirects=False)


class CustomerServices:
    """Repositories of the platform-side records and the upstream clients: one per process."""

    def __init__(
        self,
        *,
        settings: Settings,
        clock: Clock,
        sessions: async_sessionmaker[AsyncSession],
        vault: Vault,
        facilities: FacilityService,
        assistant: AssistantClient | None,
        http_factory: HttpFactory,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.sessions = sessions
        self.vault = vault
        self.http_factory = http_factory
        self.sleep = sleep
        self.customers = Customers(sessions, clock)
        self.workspaces = Workspaces(sessions, clock)
        self.integrations = CustomerIntegrations(sessions, clock)
        self.apartments = Apartments(sessions, clock)
        self.usage = UsageSnapshots(sessions)
        self.allowlist = Allowlist(sessions, clock)
        self.facilities = facilities  # the gateway's: one key cache per process
        self._platform = assistant
        # One throttle per notes token (integration row): clients of one token share its rate.
        self._notion_throttles: dict[str, NotionThrottle] = {}

    def __repr__(self) -> str:
        return f"CustomerServices(vault={self.vault!r}, platform={self._platform!r})"

    @property
    def assistant(self) -> AssistantClient:
        """The shared assistant-platform client; a configuration error when no token is set."""
        if self._platform is None:
            raise ConfigurationError(
                "PMSGATE_ASSISTANT_API_TOKEN is not set: the assistant platform cannot be reached.",
                code="platform_not_configured",
                hint="Set PMSGATE_ASSISTANT_API_URL and PMSGATE_ASSISTANT_API_TOKEN.",
            )
        return self._platform

    async def context(self, student_id: str) -> CustomerContext:
        """Everything stored about the customer; ``customer_not_found`` when unregistered."""
        key = student_id.strip()
        customer = await self.customers.find(key)
        if customer is None:
            raise customer_not_found(key)
        workspace = await self.workspaces.find(key)
        rows: dict[str, IntegrationView] = {
            row.provider: row for row in await self.integrations.of_student(key)
        }
        return CustomerContext(
            student_id=customer.student_id,
            customer=customer,
            workspace_id=workspace.workspace_id if workspace is not None else None,
            kross=rows.get(KROSS_PROVIDER),
            notes=rows.get(NOTION_PROVIDER),
            apartments=await self.apartments.of_student(key),
            workspace=workspace,
        )

    @asynccontextmanager
    async def notion(self, ctx: CustomerContext) -> AsyncIterator[NotionClient]:
        """A notes client on the customer's decrypted token, with its own httpx client."""
        if ctx.notes is None or not ctx.notes.has_token:
            raise NotionNotConnected(
                f"Customer {ctx.student_id} has no notes integration with a token."
            )
        token = await self.notion_token(ctx.notes.id)
        async with self._notion_http() as http:
            yield self.notion_client(http, token, throttle=self._throttle_for(ctx.notes.id))

    async def notion_token(self, integration_id: str) -> SecretStr:
        """The decrypted token of a notes integration row (kept in a SecretStr)."""
        ciphertext = await self.integrations.token_ciphertext(integration_id)
        if ciphertext is None:
            raise NotionNotConnected(f"Notes integration row {integration_id} has no token.")
        return SecretStr(self.vault.decrypt(ciphertext, context=token_context(integration_id)))

    def notion_client(
        self, http: httpx.AsyncClient, token: SecretStr, *, throttle: NotionThrottle | None = None
    ) -> NotionClient:
        """A notes client on ``http`` (which it takes over) configured by the settings."""
        return NotionClient.from_settings(
            http,
            token=token,
            settings=self.settings,
            clock=self.clock,
            sleep=self.sleep,
            throttle=throttle,
        )

    @asynccontextmanager
    async def _notion_http(self) -> AsyncIterator[httpx.AsyncClient]:
        http = self.http_factory()
        try:
            yield http
        finally:
            await http.aclose()

    def _throttle_for(self, integration_id: str) -> NotionThrottle:
        throttle = self._notion_throttles.get(integration_id)
        if throttle is None:
            throttle = self._notion_throttles[integration_id] = NotionThrottle(
                self.settings.notion_requests_per_second, clock=self.clock, sleep=self.sleep
            )
        return throttle
