"""The platform emulator honours docs/assistant-api.md: shapes, limits, validation, runs."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from pmsgate.clock import ManualClock
from pmsgate.sandbox.assistant.app import create_assistant_app
from pmsgate.sandbox.assistant.seed import EXISTING_WORKSPACE_SLUG, SANDBOX_ASSISTANT_TOKEN
from pmsgate.sandbox.assistant.store import AssistantStore
from pmsgate.sandbox.kross.store import KrossStore
from tests.support.asgi import asgi_client

pytestmark = pytest.mark.anyio

AUTH = {"Authorization": f"Bearer {SANDBOX_ASSISTANT_TOKEN}"}
# Ids as in the public reference's examples: 32 lowercase letters and digits.
ID32 = re.compile(r"^[0-9a-z]{32}$")

ECHO_CODE = "def main(**params):\n    return {'message': 'ok', 'rawData': params}\n"


@pytest.fixture
def store(clock: ManualClock, kross_store: KrossStore) -> AssistantStore:
    return AssistantStore(seed=5, clock=clock, kross=kross_store)


@pytest.fixture
async def http(store: AssistantStore) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(
        create_assistant_app(store), "http://platform.test", headers=AUTH
    ) as client:
        yield client


@pytest.fixture
async def workspace(http: httpx.AsyncClient) -> str:
    answer = await http.post("/v1/workspaces", json={"name": "Rossi", "slug": "rossi"})
    assert answer.status_code == 201, answer.text
    workspace_id: str = answer.json()["data"]["id"]
    return workspace_id


def tool_body(workspace_id: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "workspace_id": workspace_id,
        "name": "echo",
        "description": "Echoes its parameters.",
        "language": "python",
        "code": ECHO_CODE,
        "parameters": {
            "word": {"type": "string", "required": True, "description": "A single word."}
        },
        "execution_message_description": "Echoing",
        "enable_globally": True,
    }
    body.update(overrides)
    return body


async def create_tool(http: httpx.AsyncClient, workspace_id: str, **overrides: Any) -> str:
    answer = await http.post("/v1/custom-tools", json=tool_body(workspace_id, **overrides))
    assert answer.status_code == 201, answer.text
    tool_id: str = answer.json()["data"]["id"]
    return tool_id


async def connect(http: httpx.AsyncClient, workspace_id: str, facility: Any) -> httpx.Response:
    return await http.put(
        f"/_sandbox/workspaces/{workspace_id}/pms-connection",
        json={
            "hotel_id": facility.hotel_id,
            "username": facility.username,
            "password": facility.password,
        },
    )


# --- shapes, auth, pagination ---------------------------------------------------------------


async def test_lists_answer_data_next_cursor_and_has_more(http: httpx.AsyncClient) -> None:
    answer = await http.get("/v1/workspaces")

    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {"data", "next_cursor", "has_more"}
    assert body["has_more"] is False
    assert body["next_cursor"] is None
    assert [w["slug"] for w in body["data"]] == [EXISTING_WORKSPACE_SLUG]
    assert ID32.match(body["data"][0]["id"])


async def test_pages_default_to_20_and_follow_the_cursor(
    http: httpx.AsyncClient, workspace: str
) -> None:
    for n in range(25):
        await create_tool(http, workspace, name=f"tool-{n}")

    first = (await http.get("/v1/custom-tools", params={"workspace_id": workspace})).json()
    second = (
        await http.get(
            "/v1/custom-tools",
            params={"workspace_id": workspace, "cursor": first["next_cursor"]},
        )
    ).json()

    assert len(first["data"]) == 20
    assert first["has_more"] is True
    assert len(second["data"]) == 5
    assert second["has_more"] is False
    names = [t["name"] for t in first["data"] + second["data"]]
    assert names == [f"tool-{n}" for n in range(25)]


@pytest.mark.parametrize("limit", ["0", "101", "many"])
async def test_limit_outside_1_to_100_is_refused(
    http: httpx.AsyncClient, workspace: str, limit: str
) -> None:
    answer = await http.get("/v1/custom-tools", params={"workspace_id": workspace, "limit": limit})
    assert answer.status_code == 400
    assert "error" in answer.json()


async def test_garbled_cursor_is_refused(http: httpx.AsyncClient, workspace: str) -> None:
    answer = await http.get("/v1/custom-tools", params={"workspace_id": workspace, "cursor": "%%%"})
    assert answer.status_code == 400


@pytest.mark.parametrize("headers", [{"Authorization": ""}, {"Authorization": "Bearer nope"}])
async def test_missing_or_unknown_token_is_401_with_an_error_body(
    http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    answer = await http.get("/v1/workspaces", headers=headers)
    assert answer.status_code == 401
    assert isinstance(answer.json()["error"], str)


async def test_unknown_path_and_unknown_object_answer_404_with_an_error_body(
    http: httpx.AsyncClient,
) -> None:
    assert (await http.get("/v1/nothing-here")).json() == {"error": "no such endpoint"}
    missing = await http.get("/v1/custom-tools/0123456789abcdef01234567")
    assert missing.status_code == 404
    assert "error" in missing.json()


async def test_scoped_token_sees_only_its_workspace_and_cannot_create_workspaces(
    http: httpx.AsyncClient, workspace: str
) -> None:
    issued = await http.post("/_sandbox/tokens", json={"workspace_ids": [workspace]})
    scoped = {"Authorization": f"Bearer {issued.json()['token']}"}
    seeded = next(
        w["id"] for w in (await http.get("/v1/workspaces")).json()["data"] if w["id"] != workspace
    )

    visible = (await http.get("/v1/workspaces", headers=scoped)).json()["data"]
    assert [w["id"] for w in visible] == [workspace]
    denied = await http.get("/v1/custom-tools", params={"workspace_id": seeded}, headers=scoped)
    assert denied.status_code == 403
    create = await http.post("/v1/workspaces", json={"name": "X", "slug": "x"}, headers=scoped)
    assert create.status_code == 403


async def test_duplicate_workspace_slug_is_a_conflict(
    http: httpx.AsyncClient, workspace: str
) -> None:
    answer = await http.post("/v1/workspaces", json={"name": "Again", "slug": "rossi"})
    assert answer.status_code == 409


async def test_same_seed_gives_the_same_ids(clock: ManualClock) -> None:
    first = AssistantStore(seed=9, clock=clock)
    second = AssistantStore(seed=9, clock=clock)
    assert [w.id for w in first.workspaces()] == [w.id for w in second.workspaces()]
    assert first.create_workspace("A", "a").id == second.create_workspace("A", "a").id


# --- the 120 requests/minute limit ----------------------------------------------------------


async def test_121st_request_in_a_minute_is_429_with_retry_after(
    http: httpx.AsyncClient, workspace: str, store: AssistantStore
) -> None:
    for _ in range(120):
        assert (await http.get(f"/v1/workspaces/{workspace}")).status_code == 200

    refused = await http.get(f"/v1/workspaces/{workspace}")

    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "60"
    assert "error" in refused.json()
    stats = (await http.get("/_sandbox/stats")).json()
    assert stats["rate_limited"]["by_workspace"] == {workspace: 1}
    assert stats["requests"]["by_workspace"][workspace] == 120


async def test_window_slides_so_requests_fit_again_after_retry_after(
    http: httpx.AsyncClient, workspace: str
) -> None:
    await http.put("/_sandbox/config", json={"requests_per_minute": 3})
    for _ in range(3):
        await http.get(f"/v1/workspaces/{workspace}")
        await http.post("/_sandbox/clock/advance", json={"seconds": 10})

    refused = await http.get(f"/v1/workspaces/{workspace}")
    assert refused.status_code == 429
    # The oldest request (30 s ago) leaves the window in 30 s.
    assert refused.headers["Retry-After"] == "30"

    await http.post("/_sandbox/clock/advance", json={"seconds": 30})
    assert (await http.get(f"/v1/workspaces/{workspace}")).status_code == 200


async def test_each_workspace_has_its_own_budget(http: httpx.AsyncClient, workspace: str) -> None:
    other = (await http.post("/v1/workspaces", json={"name": "B", "slug": "b"})).json()["data"][
        "id"
    ]
    await http.put("/_sandbox/config", json={"requests_per_minute": 1})
    await http.get(f"/v1/workspaces/{workspace}")

    assert (await http.get(f"/v1/workspaces/{workspace}")).status_code == 429
    assert (await http.get(f"/v1/workspaces/{other}")).status_code == 200


async def test_requests_on_an_object_count_for_its_workspace(
    http: httpx.AsyncClient, workspace: str
) -> None:
    tool_id = await create_tool(http, workspace)
    await http.get(f"/v1/custom-tools/{tool_id}")

    stats = (await http.get("/_sandbox/stats")).json()
    assert stats["requests"]["by_workspace"][workspace] == 2


async def test_injected_failure_answers_503_once(http: httpx.AsyncClient, workspace: str) -> None:
    await http.post("/_sandbox/faults", json={"fail_next": 1})

    assert (await http.get(f"/v1/workspaces/{workspace}")).status_code == 503
    assert (await http.get(f"/v1/workspaces/{workspace}")).status_code == 200


# --- custom-tool validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    "parameter",
    [
        {"type": "string", "required": True},
        {"type": "string", "required": True, "description": ""},
        {"type": "string", "required": True, "description": "   "},
        {"type": "string", "required": True, "description": 42},
    ],
)
async def test_parameter_without_description_is_refused_with_the_exact_message(
    http: httpx.AsyncClient, workspace: str, parameter: dict[str, Any]
) -> None:
    answer = await http.post(
        "/v1/custom-tools", json=tool_body(workspace, parameters={"word": parameter})
    )
    assert answer.status_code == 422
    assert answer.json() == {"error": "parameters[].description required"}


@pytest.mark.parametrize(
    "name", ["Echo", "echo_tool", "echo tool", "echo--tool", "echo-", "-echo", "", "a" * 65]
)
async def test_tool_name_must_be_kebab_case_of_at_most_64_characters(
    http: httpx.AsyncClient, workspace: str, name: str
) -> None:
    answer = await http.post("/v1/custom-tools", json=tool_body(workspace, name=name))
    assert answer.status_code == 422
    assert "name" in answer.json()["error"]


async def test_duplicate_tool_name_is_409_and_rename_onto_it_too(
    http: httpx.AsyncClient, workspace: str
) -> None:
    await create_tool(http, workspace, name="echo")
    other = await create_tool(http, workspace, name="other")

    assert (await http.post("/v1/custom-tools", json=tool_body(workspace))).status_code == 409
    rename = await http.patch(f"/v1/custom-tools/{other}", json={"name": "echo"})
    assert rename.status_code == 409


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"language": "ruby"}, "language"),
        ({"parameters": {"word": {"type": "text", "description": "x"}}}, "type"),
        (
            {"parameters": {"word": {"type": "string", "required": "yes", "description": "x"}}},
            "required",
        ),
        ({"parameters": {"bad-name": {"type": "string", "description": "x"}}}, "bad-name"),
        ({"parameters": {"word": {"type": "string", "description": "x", "x": 1}}}, "unknown"),
        ({"description": ""}, "description"),
        ({"colour": "blue"}, "colour"),
        ({"enable_globally": "true"}, "enable_globally"),
    ],
)
async def test_other_custom_tool_validation_errors_are_422(
    http: httpx.AsyncClient, workspace: str, overrides: dict[str, Any], fragment: str
) -> None:
    answer = await http.post("/v1/custom-tools", json=tool_body(workspace, **overrides))
    assert answer.status_code == 422
    assert fragment in answer.json()["error"]


async def test_tool_for_an_unknown_workspace_is_404(http: httpx.AsyncClient) -> None:
    answer = await http.post("/v1/custom-tools", json=tool_body("0" * 24))
    assert answer.status_code == 404


# --- tool runs ------------------------------------------------------------------------------


async def test_run_executes_the_code_with_secrets_as_environment_and_records_the_run(
    http: httpx.AsyncClient, workspace: str
) -> None:
    await http.put(f"/v1/workspaces/{workspace}/secrets/GATEWAY_KEY", json={"value": "gk-1"})
    code = (
        "import os, sys\n"
        "def main(**params):\n"
        "    print('chatter on stdout')\n"
        "    return {'message': params['word'], 'rawData': {\n"
        "        'key': os.environ['GATEWAY_KEY'], 'names': sorted(os.environ),\n"
        "        'isolated': sys.flags.isolated}}\n"
    )
    tool_id = await create_tool(http, workspace, code=code)

    answer = await http.post(f"/v1/custom-tools/{tool_id}/run", json={"parameters": {"word": "hi"}})

    assert answer.status_code == 200
    body = answer.json()["data"]
    assert set(body) == {"success", "message", "result", "error", "logs", "run_time_ms"}
    assert body["success"] is True
    assert body["error"] is None
    assert body["result"]["message"] == "hi"
    raw = body["result"]["rawData"]
    assert raw["key"] == "gk-1"
    assert raw["isolated"] == 1
    # Only the workspace secrets: nothing of the emulator's own environment leaks in.
    assert "PATH" not in raw["names"]
    assert not [n for n in raw["names"] if n.startswith("PMSGATE")]
    runs = (await http.get(f"/_sandbox/workspaces/{workspace}/tool-runs")).json()
    assert [(r["tool_name"], r["parameters"]) for r in runs] == [("echo", {"word": "hi"})]


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("def main(**params):\n    raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("def helper():\n    pass\n", "main"),
        ("def main(**params):\n    return 'plain text'\n", "message"),
        ("def main(:\n", "SyntaxError"),
        ("import os\ndef main(**params):\n    os._exit(3)\n", "status 3"),
    ],
)
async def test_failing_tool_answers_200_with_success_false(
    http: httpx.AsyncClient, workspace: str, code: str, fragment: str
) -> None:
    tool_id = await create_tool(http, workspace, code=code, parameters={})

    answer = await http.post(f"/v1/custom-tools/{tool_id}/run", json={"parameters": {}})

    assert answer.status_code == 200
    assert answer.json()["data"]["success"] is False
    assert answer.json()["data"]["result"] is None
    assert fragment in answer.json()["data"]["error"]


async def test_tool_error_message_never_shows_a_secret_value(
    http: httpx.AsyncClient, workspace: str
) -> None:
    await http.put(f"/v1/workspaces/{workspace}/secrets/KEY", json={"value": "s3cr3t-v4lue"})
    code = "import os\ndef main(**params):\n    raise ValueError(os.environ['KEY'])\n"
    tool_id = await create_tool(http, workspace, code=code, parameters={})

    answer = await http.post(f"/v1/custom-tools/{tool_id}/run", json={})

    assert answer.json()["data"]["success"] is False
    assert "s3cr3t-v4lue" not in answer.text


async def test_tool_past_the_timeout_answers_success_false(
    http: httpx.AsyncClient, workspace: str
) -> None:
    await http.put("/_sandbox/config", json={"tool_timeout_s": 0.3})
    code = "def main(**params):\n    while True:\n        pass\n"
    tool_id = await create_tool(http, workspace, code=code, parameters={})

    answer = await http.post(f"/v1/custom-tools/{tool_id}/run", json={})

    assert answer.status_code == 200
    assert answer.json()["data"]["success"] is False
    assert "0.3 s" in answer.json()["data"]["message"]


@pytest.mark.parametrize(
    "parameters", [{}, {"word": 3}, {"word": "hi", "extra": 1}], ids=["missing", "type", "extra"]
)
async def test_run_with_wrong_parameters_is_422(
    http: httpx.AsyncClient, workspace: str, parameters: dict[str, Any]
) -> None:
    tool_id = await create_tool(http, workspace)
    answer = await http.post(f"/v1/custom-tools/{tool_id}/run", json={"parameters": parameters})
    assert answer.status_code == 422


# --- idempotency ----------------------------------------------------------------------------


async def test_write_repeated_with_the_same_idempotency_key_is_replayed_not_reapplied(
    http: httpx.AsyncClient, workspace: str, store: AssistantStore
) -> None:
    headers = {"Idempotency-Key": "create-echo"}
    first = await http.post("/v1/custom-tools", json=tool_body(workspace), headers=headers)
    second = await http.post("/v1/custom-tools", json=tool_body(workspace), headers=headers)
    changed = await http.post(
        "/v1/custom-tools", json=tool_body(workspace, name="other"), headers=headers
    )

    assert first.status_code == second.status_code == 201
    assert second.json() == first.json()
    assert second.headers["Idempotent-Replayed"] == "true"
    assert changed.status_code == 422
    assert len(store.tools(workspace)) == 1


# --- skills and agents ----------------------------------------------------------------------


async def test_agent_keeps_guardrails_skills_mode_language_and_triggers(
    http: httpx.AsyncClient, workspace: str
) -> None:
    skill = await create_skill(
        http,
        workspace,
        "check-in-access-manager",
        "get-checkin-instructions",
        tags=["standard"],
        enabled=True,
    )
    agent = {
        "workspace_id": workspace,
        "name": "Guest agent",
        "description": "Answers guests.",
        "instructions": "Be brief.",
        "guardrails": [{"title": "Escalations", "knowledge": "Write escalations in Italian."}],
        "skill_ids": [skill],
        "operation_mode": "copilot",
        "response_language": "Original",
        "triggers": [
            {
                "name": "Guest inbox messages",
                "type": "message",
                "config": {"inboxTypeId": "guest", "channels": ["whatsapp", "email"]},
                "enabled": True,
            }
        ],
        "enabled": True,
    }

    created = await http.post("/v1/agents", json=agent)
    read = (await http.get(f"/v1/agents/{created.json()['data']['id']}")).json()["data"]

    assert created.status_code == 201
    for key in ("skill_ids", "operation_mode", "response_language"):
        assert read[key] == agent[key]
    # The platform adds an id to every guardrail and trigger (documented examples).
    assert [{k: g[k] for k in ("title", "knowledge")} for g in read["guardrails"]] == agent[
        "guardrails"
    ]
    trigger = read["triggers"][0]
    assert ID32.match(trigger["id"])
    assert {k: trigger[k] for k in ("name", "type", "config", "enabled")} == agent["triggers"][0]


@pytest.mark.parametrize(
    "overrides",
    [
        {"operation_mode": "pilot"},
        {"guardrails": [{"title": "No knowledge"}]},
        {"guardrails": [{"title": "", "knowledge": "x"}]},
        {"triggers": [{"name": "t", "type": "email", "config": {"inboxTypeId": "guest"}}]},
        {"triggers": [{"name": "t", "type": "message", "config": {}}]},
        {"skill_ids": ["0" * 24]},
        {"response_language": ""},
    ],
)
async def test_invalid_agent_is_422(
    http: httpx.AsyncClient, workspace: str, overrides: dict[str, Any]
) -> None:
    answer = await http.post(
        "/v1/agents", json={"workspace_id": workspace, "name": "Guest agent", **overrides}
    )
    assert answer.status_code == 422


async def test_duplicate_skill_name_is_409(http: httpx.AsyncClient, workspace: str) -> None:
    skill = {
        "workspace_id": workspace,
        "name": "payment-link-generator",
        "display_name": "Payment link generator",
        "description": "Payment links.",
        "body": "Only when asked.",
    }
    assert (await http.post("/v1/skills", json=skill)).status_code == 201
    assert (await http.post("/v1/skills", json=skill)).status_code == 409


# --- listings -------------------------------------------------------------------------------


async def test_listings_mirror_apartments_while_the_connection_is_healthy(
    http: httpx.AsyncClient, workspace: str, kross_store: KrossStore
) -> None:
    facility = kross_store.facilities()[1]
    connected = await connect(http, workspace, facility)
    assert connected.json()["healthy"] is True  # the control's own (bare) answer
    assert facility.password not in connected.text

    listings = (await http.get("/v1/listings", params={"workspace_id": workspace})).json()["data"]
    assert len(listings) == len(facility.apartments)
    assert all(ID32.match(li["id"]) for li in listings)

    kross_store.change_password(facility.hotel_id, "a-new-password")
    after = (await http.get("/v1/listings", params={"workspace_id": workspace})).json()
    assert after["data"] == []
    state = (await http.get(f"/_sandbox/workspaces/{workspace}/pms-connection")).json()
    assert state["healthy"] is False


async def test_connection_to_an_unknown_facility_gives_no_listings(
    http: httpx.AsyncClient, workspace: str
) -> None:
    await http.put(
        f"/_sandbox/workspaces/{workspace}/pms-connection",
        json={"hotel_id": "000000", "username": "api00000", "password": "x"},
    )
    listings = (await http.get("/v1/listings", params={"workspace_id": workspace})).json()
    assert listings["data"] == []


async def test_listings_need_a_workspace_id(http: httpx.AsyncClient) -> None:
    assert (await http.get("/v1/listings")).status_code == 400


# --- knowledge nodes ------------------------------------------------------------------------


async def test_nodes_are_filtered_by_listing_and_parent(
    http: httpx.AsyncClient, workspace: str
) -> None:
    base = "/v1/kb/nodes"
    params = {"workspace_id": workspace}
    folder = (
        await http.post(base, params=params, json={"title": "Sync", "is_directory": True})
    ).json()["data"]
    for title, entity in (("WiFi", "listing-1"), ("Rules", "listing-2")):
        created = await http.post(
            base,
            params=params,
            json={"title": title, "body": "...", "parent_id": folder["id"], "entity_ids": [entity]},
        )
        assert created.status_code == 201
        assert ID32.match(created.json()["data"]["id"])

    of_listing = await http.get(
        base, params={**params, "listing_id": "listing-1", "parent_id": folder["id"]}
    )
    assert [n["title"] for n in of_listing.json()["data"]] == ["WiFi"]
    under = await http.get(base, params={**params, "parent_id": folder["id"]})
    assert len(under.json()["data"]) == 2


async def test_patching_a_node_body_reindexes_it(http: httpx.AsyncClient, workspace: str) -> None:
    params = {"workspace_id": workspace}
    node = (
        await http.post("/v1/kb/nodes", params=params, json={"title": "WiFi", "body": "a"})
    ).json()["data"]
    await http.post("/_sandbox/clock/advance", json={"seconds": 5})

    retitled = (await http.patch(f"/v1/kb/nodes/{node['id']}", json={"title": "WiFi!"})).json()[
        "data"
    ]
    assert retitled["indexed_at"] == node["indexed_at"]
    rebodied = (await http.patch(f"/v1/kb/nodes/{node['id']}", json={"body": "b"})).json()["data"]
    assert rebodied["indexed_at"] > node["indexed_at"]
    assert rebodied["body"] == "b"


@pytest.mark.parametrize("change", [{"is_directory": True}, {"parent_id": "f" * 32}, {"title": ""}])
async def test_invalid_node_patch_is_422(
    http: httpx.AsyncClient, workspace: str, change: dict[str, Any]
) -> None:
    params = {"workspace_id": workspace}
    node = (await http.post("/v1/kb/nodes", params=params, json={"title": "T"})).json()["data"]
    answer = await http.patch(f"/v1/kb/nodes/{node['id']}", json=change)
    assert answer.status_code == 422


async def test_directory_cannot_be_moved_inside_itself(
    http: httpx.AsyncClient, workspace: str
) -> None:
    params = {"workspace_id": workspace}
    outer = (
        await http.post("/v1/kb/nodes", params=params, json={"title": "A", "is_directory": True})
    ).json()["data"]
    inner = (
        await http.post(
            "/v1/kb/nodes",
            params=params,
            json={"title": "B", "is_directory": True, "parent_id": outer["id"]},
        )
    ).json()["data"]
    answer = await http.patch(f"/v1/kb/nodes/{outer['id']}", json={"parent_id": inner["id"]})
    assert answer.status_code == 422


# --- members, roles, secrets ----------------------------------------------------------------


async def test_new_workspace_has_its_owner_and_members_get_roles(
    http: httpx.AsyncClient, workspace: str
) -> None:
    members = (await http.get(f"/v1/workspaces/{workspace}/members")).json()["data"]
    assert [m["role"] for m in members] == ["Owner"]

    added = await http.post(
        f"/v1/workspaces/{workspace}/members", json={"email": "team@example.com", "role": "Admin"}
    )
    assert added.status_code == 201
    bad_role = await http.post(
        f"/v1/workspaces/{workspace}/members", json={"email": "x@example.com", "role": "God"}
    )
    assert bad_role.status_code == 422
    bad_email = await http.post(
        f"/v1/workspaces/{workspace}/members", json={"email": "not-an-email", "role": "Viewer"}
    )
    assert bad_email.status_code == 422
    roles = (await http.get(f"/v1/workspaces/{workspace}/roles")).json()["data"]
    assert {"Owner", "Admin", "Editor", "Viewer"} == {r["name"] for r in roles}


async def test_secrets_are_write_only(http: httpx.AsyncClient, workspace: str) -> None:
    created = await http.put(f"/v1/workspaces/{workspace}/secrets/API_KEY", json={"value": "v-1"})
    replaced = await http.put(f"/v1/workspaces/{workspace}/secrets/API_KEY", json={"value": "v-2"})
    listed = await http.get(f"/v1/workspaces/{workspace}/secrets")

    assert (created.status_code, replaced.status_code) == (201, 200)
    assert [s["name"] for s in listed.json()["data"]] == ["API_KEY"]
    for answer in (created, replaced, listed):
        assert "v-1" not in answer.text
        assert "v-2" not in answer.text
    bad = await http.put(f"/v1/workspaces/{workspace}/secrets/1BAD", json={"value": "x"})
    assert bad.status_code == 422


# --- controls -------------------------------------------------------------------------------


async def test_reset_returns_to_the_seed(http: httpx.AsyncClient, workspace: str) -> None:
    await http.post("/_sandbox/reset")

    slugs = [w["slug"] for w in (await http.get("/v1/workspaces")).json()["data"]]
    assert slugs == [EXISTING_WORKSPACE_SLUG]
    summaries = (await http.get("/_sandbox/workspaces")).json()
    assert summaries[0]["custom_tools"] == 1


# --- test conversations (emulator-only) -----------------------------------------------------

STAY_CODE = (
    "def main(**params):\n"
    "    return {'message': 'free from ' + params['arrival'] + ' to ' + params['departure'],\n"
    "            'rawData': params}\n"
)
STAY_PARAMETERS = {
    "arrival": {"type": "string", "required": True, "description": "First night, a date."},
    "departure": {"type": "string", "required": True, "description": "Day of leaving, a date."},
    "apartment_id": {"type": "integer", "required": False, "description": "One apartment."},
}


async def create_agent(
    http: httpx.AsyncClient, workspace: str, skill_ids: list[str] | None = None, **fields: Any
) -> str:
    body = {"workspace_id": workspace, "name": "guest-agent", "skill_ids": skill_ids or []}
    answer = await http.post("/v1/agents", json={**body, **fields})
    assert answer.status_code == 201, answer.text
    agent_id: str = answer.json()["data"]["id"]
    return agent_id


async def create_skill(
    http: httpx.AsyncClient, workspace: str, name: str, tool: str, **fields: Any
) -> str:
    """A new skill allowing ``tool``; its id."""
    body = {
        "workspace_id": workspace,
        "name": name,
        "display_name": name.replace("-", " ").capitalize(),
        "description": f"The {name} skill.",
        "body": f"Use {tool}.",
        "allowed_tools": [tool],
    }
    answer = await http.post("/v1/skills", json={**body, **fields})
    assert answer.status_code == 201, answer.text
    skill_id: str = answer.json()["data"]["id"]
    return skill_id


async def availability_agent(http: httpx.AsyncClient, workspace: str) -> str:
    """An agent of a workspace whose check-availability tool is enabled globally."""
    await create_tool(
        http, workspace, name="check-availability", code=STAY_CODE, parameters=STAY_PARAMETERS
    )
    return await create_agent(http, workspace)


async def talk(http: httpx.AsyncClient, agent: str, message: str) -> httpx.Response:
    """One test-conversation message to ``agent``."""
    return await http.post(f"/v1/agents/{agent}/test-conversations", json={"message": message})


async def test_conversation_runs_check_availability_with_the_asked_dates_and_records_it(
    http: httpx.AsyncClient, workspace: str
) -> None:
    agent = await availability_agent(http, workspace)

    answer = await talk(http, agent, "C'è disponibilità dal 2030-05-12 al 2030-05-10?")

    assert answer.status_code == 201, answer.text
    body = answer.json()["data"]
    assert body["agent_id"] == agent
    assert body["tool_calls"] == [
        {
            "name": "check-availability",
            "parameters": {"arrival": "2030-05-10", "departure": "2030-05-12"},
            "success": True,
            "message": "free from 2030-05-10 to 2030-05-12",
        }
    ]
    assert "2030-05-10" in body["reply"]
    listed = (await http.get(f"/v1/agents/{agent}/test-conversations")).json()
    assert [c["id"] for c in listed["data"]] == [body["id"]]
    runs = (await http.get(f"/_sandbox/workspaces/{workspace}/tool-runs")).json()
    assert [r["tool_name"] for r in runs] == ["check-availability"]
    control = (await http.get(f"/_sandbox/workspaces/{workspace}/test-conversations")).json()
    assert [c["id"] for c in control] == [body["id"]]
    stats = (await http.get("/_sandbox/stats")).json()
    # The agent's tool call spends the workspace's budget like a request.
    assert stats["requests"]["by_route"]["AGENT tool call check-availability"] == 1


async def test_conversation_without_an_availability_question_calls_no_tool(
    http: httpx.AsyncClient, workspace: str
) -> None:
    agent = await availability_agent(http, workspace)

    one_date = await talk(http, agent, "Is it available on 2030-05-10?")
    no_intent = await talk(http, agent, "What is the WiFi password, 2030-05-10 to 2030-05-12?")

    assert one_date.json()["data"]["tool_calls"] == []
    assert no_intent.json()["data"]["tool_calls"] == []
    assert (await http.get(f"/_sandbox/workspaces/{workspace}/tool-runs")).json() == []


async def test_conversation_uses_a_tool_only_if_global_or_allowed_by_a_skill(
    http: httpx.AsyncClient, workspace: str
) -> None:
    await create_tool(
        http,
        workspace,
        name="check-availability",
        code=STAY_CODE,
        parameters=STAY_PARAMETERS,
        enable_globally=False,
    )
    bare = await create_agent(http, workspace)
    skill = await create_skill(http, workspace, "booking-extension-assistant", "check-availability")
    skilled = await create_agent(http, workspace, skill_ids=[skill], name="skilled-agent")
    message = {"message": "availability 2030-05-10 2030-05-12"}

    without = await http.post(f"/v1/agents/{bare}/test-conversations", json=message)
    with_skill = await http.post(f"/v1/agents/{skilled}/test-conversations", json=message)

    assert without.json()["data"]["tool_calls"] == []
    assert "no check-availability tool" in without.json()["data"]["reply"]
    assert [c["name"] for c in with_skill.json()["data"]["tool_calls"]] == ["check-availability"]


async def test_conversation_with_a_disabled_agent_is_409_and_an_empty_message_422(
    http: httpx.AsyncClient, workspace: str
) -> None:
    disabled = await create_agent(http, workspace, enabled=False)
    enabled = await create_agent(http, workspace, name="other-agent")

    refused = await http.post(
        f"/v1/agents/{disabled}/test-conversations", json={"message": "availability?"}
    )
    empty = await http.post(f"/v1/agents/{enabled}/test-conversations", json={"message": " "})
    unknown = await http.post(f"/v1/agents/{'0' * 24}/test-conversations", json={"message": "x"})

    assert refused.status_code == 409
    assert empty.status_code == 422
    assert unknown.status_code == 404
