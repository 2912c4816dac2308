"""/docs and /redoc work without internet: every asset they load is the app's own.

Also: `pmsgate serve` runs uvicorn with uvloop and httptools (uvicorn[standard]).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx
import pytest

from pmsgate.app import create_app
from pmsgate.cli import _uvicorn_config
from pmsgate.config import Settings

# Every URL a page loads: src/href attributes, Swagger UI's `url: '…'`, ReDoc's spec-url.
LOADED = re.compile(r"""(?:src|href|spec-url)\s*=\s*["']([^"']+)["']|\burl:\s*["']([^"']+)["']""")


@pytest.fixture
async def caller() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as client:
        yield client


@pytest.mark.anyio
@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_the_documentation_pages_load_only_same_origin_assets(caller, page):
    answer = await caller.get(page)
    assert answer.status_code == 200
    # Nothing from elsewhere, even what the pages' scripts add later (ReDoc's footer logo).
    assert "default-src 'self'" in answer.headers["content-security-policy"]
    urls = [next(group for group in found if group) for found in LOADED.findall(answer.text)]
    assert any(url.endswith(".js") for url in urls), urls
    assert "http://" not in answer.text.replace("http://gateway.test", "")
    assert "https://" not in answer.text
    for url in urls:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc and url.startswith("/"), url
        loaded = await caller.get(url)
        assert loaded.status_code == 200, url
        assert loaded.content, url


@pytest.mark.anyio
async def test_the_pages_follow_the_root_path_of_a_proxy_prefix():
    app = create_app(Settings())
    transport = httpx.ASGITransport(app=app, root_path="/gateway")
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as client:
        page = (await client.get("/docs")).text
    assert "/gateway/docs/assets/swagger-ui-bundle.js" in page
    assert "/gateway/openapi.json" in page


@pytest.mark.anyio
async def test_the_assets_are_off_with_the_api_docs():
    app = create_app(Settings(api_docs=False))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as client:
        for path in ("/docs", "/redoc", "/docs/assets/swagger-ui-bundle.js", "/openapi.json"):
            assert (await client.get(path)).status_code == 404, path


def test_serve_runs_on_uvloop_and_httptools():
    import uvloop

    config = _uvicorn_config(object(), host="127.0.0.1", port=0, forwarded_allow_ips="127.0.0.1")
    assert (config.loop, config.http) == ("auto", "auto")
    config.load()
    assert config.http_protocol_class.__name__ == "HttpToolsProtocol"
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
