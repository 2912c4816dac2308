"""A client generated from the served /openapi.json answers with typed models, not dicts.

openapi-python-client (a dev dependency) generates a client package from the document a
running gateway serves (uvicorn on loopback, the booking-system emulator behind it) into a
temporary directory; the test imports it and calls each tool through it. Every answer must
be the generated model of the tool's declared answer (docs/gateway.md, "Typed answers"),
its data and meta typed too, its dates ``datetime.date``. The generator runs offline (it
reads the file it is given) in about five seconds.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import re
import sys
import typing
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest

from pmsgate.catalogue.loader import load_tools
from pmsgate.clock import ManualClock
from pmsgate.sandbox.kross.store import KrossStore
from tests.gateway.test_typed_answers import every_tool_call, gateway_app, staying_tonight
from tests.support.servers import free_port, serving_app

pytestmark = pytest.mark.anyio

PACKAGE = "pmsgate_typed_client"
# No post-hook (the generator would run ruff over the code), the package's name fixed.
CONFIG = f"post_hooks: []\npackage_name_override: {PACKAGE}\n"
GENERATOR = Path(sys.executable).parent / "openapi-python-client"


@dataclass
class Running:
    """A gateway served on loopback, with one facility's key."""

    base_url: str
    key: str
    hotel_id: str
    today: dt.date


@pytest.fixture
async def running(
    database_url: str, kross_http: httpx.AsyncClient, kross_store: KrossStore, clock: ManualClock
) -> AsyncIterator[Running]:
    async with (
        gateway_app(database_url, kross_http, kross_store, clock) as (app, key, hotel_id),
        serving_app(app, free_port()) as base_url,
    ):
        yield Running(base_url, key, hotel_id, clock.now().date())


@pytest.fixture
def generated_package(tmp_path: Path) -> Iterator[Path]:
    """Where the client is generated; its modules forgotten afterwards."""
    yield tmp_path
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


async def generate(document: bytes, into: Path) -> ModuleType:
    """The client openapi-python-client makes of ``document``, imported."""
    (into / "openapi.json").write_bytes(document)
    (into / "config.yaml").write_text(CONFIG)
    with anyio.fail_after(180):
        made = await anyio.run_process(
            [
                str(GENERATOR),
                "generate",
                "--path",
                str(into / "openapi.json"),
                "--output-path",
                str(into / PACKAGE),
                "--meta",
                "none",
                "--config",
                str(into / "config.yaml"),
            ],
            check=False,
        )
    assert made.returncode == 0, made.stderr.decode() + made.stdout.decode()
    assert b"Warning" not in made.stdout + made.stderr, made.stdout.decode()
    repair_boolean_constants(into / PACKAGE)
    sys.path.insert(0, str(into))
    try:
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(into))


# openapi-python-client 0.29.1 writes the check of an optional boolean `const` (the admin
# API's ScopesBody: `all_scopes: false` beside `scopes`) without a space: `!= Falseand`.
_GLUED_CONSTANT = re.compile(r"!= (True|False)and ")


def repair_boolean_constants(package: Path) -> None:
    """Put back the space the generator leaves out (nothing else is touched), so the whole
    document's client imports."""
    for module in package.rglob("*.py"):
        source = module.read_text()
        repaired = _GLUED_CONSTANT.sub(r"!= \1 and ", source)
        if repaired != source:
            module.write_text(repaired)


def body_for(endpoint: ModuleType, arguments: dict[str, Any]) -> Any:
    """``arguments`` as the generated endpoint's body: its model where it has one."""
    body_type = typing.get_type_hints(endpoint._get_kwargs)["body"]
    # An optional body is `Model | Unset`; a body of alternatives (anyOf) is any JSON.
    for candidate in typing.get_args(body_type) or (body_type,):
        from_dict = getattr(candidate, "from_dict", None)
        if from_dict is not None:
            return from_dict(arguments)
    return arguments


async def test_a_generated_client_gets_typed_answers_from_every_tool(
    running: Running, kross_store: KrossStore, generated_package: Path
) -> None:
    async with httpx.AsyncClient() as http:
        document = (await http.get(f"{running.base_url}/openapi.json")).content
    client_package = await generate(document, generated_package)
    models = importlib.import_module(f"{PACKAGE}.models")
    client = client_package.AuthenticatedClient(base_url=running.base_url, token=running.key)

    reservation_id = staying_tonight(kross_store, running.hotel_id, running.today)
    called = set()
    async with client:
        for name, arguments in every_tool_call(reservation_id, running.today):
            endpoint = importlib.import_module(
                f"{PACKAGE}.api.gateway.tool_{name.replace('-', '_')}"
            )
            answer = await endpoint.asyncio_detailed(
                client=client, body=body_for(endpoint, arguments)
            )
            assert answer.status_code == 200, (name, answer.content)
            declared = load_tools()[name].answer_model()
            assert declared is not None
            parsed = answer.parsed
            assert type(parsed) is getattr(models, declared.__name__), (name, type(parsed))
            data_type = declared.model_fields["data"].annotation
            meta_type = declared.model_fields["meta"].annotation
            assert isinstance(data_type, type) and isinstance(meta_type, type)
            assert type(parsed.data) is getattr(models, data_type.__name__), name
            assert type(parsed.meta) is getattr(models, meta_type.__name__), name
            assert parsed.meta.source.value in ("upstream", "cache")
            # Everything read into the models, nothing lost: they give the answer back whole.
            assert parsed.to_dict() == json.loads(answer.content), name
            called.add(name)

        availability = importlib.import_module(f"{PACKAGE}.api.gateway.tool_check_availability")
        first = dict(every_tool_call(reservation_id, running.today))["check-availability"]
        stay = await availability.asyncio(client=client, body=body_for(availability, first))
        assert isinstance(stay.data.arrival, dt.date)
        assert stay.data.apartments and all(
            type(a) is models.ApartmentAvailability for a in stay.data.apartments
        )

        listing = importlib.import_module(f"{PACKAGE}.api.gateway.operation_reservations_get_list")
        read = await listing.asyncio(
            client=client, body=body_for(listing, {"id_reservation": reservation_id})
        )
        assert type(read) is models.OperationReadAnswer
        assert type(read.meta) is models.OperationReadMeta

        tools = importlib.import_module(f"{PACKAGE}.api.gateway.list_tools_v1_tools_get")
        listed = await tools.asyncio(client=client)
        assert type(listed) is models.ToolListing
        assert [type(t) for t in listed.tools] == [models.ListedTool] * len(load_tools())

        missing = importlib.import_module(f"{PACKAGE}.api.gateway.tool_get_reservation_status")
        refused = await missing.asyncio(
            client=client, body=body_for(missing, {"reservation_id": 1})
        )
        assert type(refused) is models.ErrorBody
        assert refused.error.code == "reservation_not_found"
    assert called == set(load_tools())
