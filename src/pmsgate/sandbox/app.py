"""All emulators behind one ASGI app, under /kross, /assistant and /notion."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import FastAPI

from pmsgate.clock import Clock, SystemClock
from pmsgate.sandbox.assistant.app import create_assistant_app
from pmsgate.sandbox.assistant.store import AssistantStore
from pmsgate.sandbox.kross.app import create_kross_app
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.sandbox.notion.app import create_notion_app
from pmsgate.sandbox.notion.store import NotionStore


@dataclass
class Sandbox:
    """The emulators' state, reachable in-process (demo) or over HTTP (`pmsgate sandbox`)."""

    seed: int = 1
    clock: Clock = field(default_factory=SystemClock)
    kross: KrossStore = field(init=False)
    assistant: AssistantStore = field(init=False)
    notion: NotionStore = field(init=False)

    def __post_init__(self) -> None:
        self.kross = KrossStore(
            seed=self.seed, clock=self.clock, partner_api_key=SANDBOX_PARTNER_API_KEY
        )
        self.assistant = AssistantStore(seed=self.seed, clock=self.clock, kross=self.kross)
        self.notion = NotionStore(seed=self.seed, clock=self.clock, kross=self.kross)

    def asgi_app(self) -> FastAPI:
        """One app serving every emulator under its prefix."""
        app = FastAPI(title="pmsgate sandbox", docs_url=None, redoc_url=None)
        app.mount("/kross", create_kross_app(self.kross))
        app.mount("/assistant", create_assistant_app(self.assistant))
        app.mount("/notion", create_notion_app(self.notion))
        return app
