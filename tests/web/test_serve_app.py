"""`pmsgate serve`'s app: the web application and the scheduled jobs come with it."""

from __future__ import annotations

import gc

import httpx
import pytest
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.config import Settings
from pmsgate.container import open_container
from pmsgate.gateway.vault import generate_key_spec
from pmsgate.jobs.runs import JobRuns
from pmsgate.jobs.usage import FLUSH_GATEWAY_USAGE
from pmsgate.storage.db import open_database, session_factory

pytestmark = pytest.mark.anyio


def serve_settings(database_url: str, **overrides: object) -> Settings:
    """What `pmsgate serve` reads from the environment, for a database of the test's."""
    return Settings(
        database_url=database_url,
        redis_url=None,
        secret_keys=SecretStr(generate_key_spec("serve")),
        **overrides,  # type: ignore[arg-type]
    )


async def job_names_run(database_url: str) -> set[str]:
    async with open_database(database_url) as engine:
        runs = await JobRuns(session_factory(engine)).latest_by_job()
    return set(runs)


async def test_the_served_app_runs_the_scheduled_jobs_and_serves_the_console(
    database_url: str,
) -> None:
    app = create_app(serve_settings(database_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve.test") as http:
            login = await http.get("/login")
            assert login.status_code == 200
            assert (await http.get("/console")).headers["location"].startswith("/login")
    # The scheduler ran inside the app: stopping it wrote the last usage counts.
    assert FLUSH_GATEWAY_USAGE in await job_names_run(database_url)


async def test_with_the_scheduler_disabled_only_the_per_process_flush_runs_in_the_app(
    database_url: str,
) -> None:
    app = create_app(serve_settings(database_url, scheduler_enabled=False))
    async with app.router.lifespan_context(app):
        assert app.state.container.web is not None
    # The shared jobs are left to the external scheduler; this process's counts are not.
    assert await job_names_run(database_url) == {FLUSH_GATEWAY_USAGE}


async def test_the_served_app_freezes_the_heap_its_start_up_made_and_unfreezes_it_at_exit(
    database_url: str,
) -> None:
    # Production speed (issue 15): full collections must not walk what start-up built.
    gc.unfreeze()
    app = create_app(serve_settings(database_url, scheduler_enabled=False))
    async with app.router.lifespan_context(app):
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


async def test_an_app_given_a_container_leaves_the_collector_as_it_is(database_url: str) -> None:
    gc.unfreeze()
    settings = serve_settings(database_url, scheduler_enabled=False)
    async with open_container(settings) as container:
        app = create_app(settings, container=container)
        async with app.router.lifespan_context(app):
            assert gc.get_freeze_count() == 0


def test_the_sync_route_waits_800_seconds_by_default_as_the_specification_configures() -> None:
    # Spec §7/§8: 300 s by default cut commits in half; the route is configured at 800 s.
    assert Settings.model_fields["sync_max_duration_s"].default == 800.0
