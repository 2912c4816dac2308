"""All emulators behind one ASGI app, under /kross, /platform and /notes."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import FastAPI

from pmsgate.clock import Clock, SystemClock
from pmsgate.sandbox.assistant.app import create_platform_app
from pmsgate.sandbox.assistant.store import PlatformStore
from pmsgate.sandbox.kross.app import create_kross_app
from pmsgate.sandbox.kross.seed import SANDBOX_PARTNER_API_KEY
from pmsgate.sandbox.kross.store import KrossStore
from pmsgate.sandbox.notion.app import create_notes_app
from pmsgate.sandbox.notion.store import NotesStore


@dataclass
class Sandbox:
    """The emulators' state, reachable in-process (demo) or over HTTP (`pmsgate sandbox`)."""

    seed: int = 1
    clock: Clock = field(default_factory=SystemClock)
    kross: KrossStore = field(init=False)
    platform: PlatformStore = field(init=False)
    notes: NotesStore = field(init=False)

    def __post_init__(self) -> None:
        self.kross = KrossStore(
            seed=self.seed, clock=self.clock, partner_api_key=SANDBOX_PARTNER_API_KEY
        )
        self.platform = PlatformStore(seed=self.seed, clock=self.clock, kross=self.kross)
        self.notes = NotesStore(seed=self.seed, clock=self.clock, kross=self.kross)

    def asgi_app(self) -> FastAPI:
        """One app serving every emulator under its prefix."""
        app = FastAPI(title="pmsgate sandbox", docs_url=None, redoc_url=None)
        app.mount("/kross", create_kross_app(self.kross))
        app.mount("/platform", create_platform_app(self.platform))
        app.mount("/notes", create_notes_app(self.notes))
        return app
