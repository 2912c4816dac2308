"""/docs and /redoc render in a real browser that can reach nothing but the gateway.

Every request to another origin is aborted (as on a machine without internet access):
Swagger UI and ReDoc must still draw the API's title and its routes from the assets
the gateway serves itself (pmsgate.api_docs, docs/operations.md).
"""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import ARTIFACTS, LiveConsole, screenshot


def offline(page: Any, origin: str) -> list[str]:
    """Abort every request that leaves ``origin``; the list of those refused."""
    refused: list[str] = []

    def route(request_route: Any) -> None:
        url = request_route.request.url
        if url.startswith(origin + "/"):
            request_route.continue_()
        else:
            refused.append(url)
            request_route.abort()

    page.route("**/*", route)
    return refused


def test_swagger_ui_renders_without_internet(page: Any, live_console: LiveConsole) -> None:
    refused = offline(page, live_console.url)
    page.goto(f"{live_console.url}/docs")
    page.locator(".swagger-ui .info .title").filter(has_text="pmsgate").wait_for()
    page.locator(".opblock-summary-path", has_text="/v1/tools/").first.wait_for()
    screenshot(page, "api-docs-swagger-offline")
    assert refused == []


def test_redoc_renders_without_internet(page: Any, live_console: LiveConsole) -> None:
    refused = offline(page, live_console.url)
    page.goto(f"{live_console.url}/redoc")
    page.locator("h1", has_text="pmsgate").wait_for()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)  # the first screen: the whole page is huge
    page.screenshot(path=str(ARTIFACTS / "api-docs-redoc-offline.png"))
    assert refused == []
