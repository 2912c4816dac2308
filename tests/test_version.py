"""One version everywhere: the CLI, /healthz, the build-info metric and the console's footer
say what :func:`pmsgate.version.build_info` says; the revision comes from the image's
variable, else the checkout's HEAD (loose or packed ref), else ``unknown``."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pmsgate.cli import app as cli
from pmsgate.gateway.metrics import GatewayMetrics
from pmsgate.version import (
    REVISION_VARIABLE,
    _git_revision,
    _revision,
    build_info,
)
from tests.web.support import web_sandbox

SHA = "89abcdef0123456789abcdef0123456789abcdef"


def test_the_version_is_the_installed_distributions() -> None:
    assert build_info().version == metadata.version("pmsgate")


def test_the_images_revision_variable_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REVISION_VARIABLE, SHA.upper())
    assert _revision() == SHA
    monkeypatch.setenv(REVISION_VARIABLE, "not a sha; rm -rf /")
    assert _revision() != "not a sha; rm -rf /"


def test_a_checkout_s_head_is_read_from_a_loose_or_a_packed_ref(tmp_path: Path) -> None:
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    inner = tmp_path / "src" / "pmsgate"
    inner.mkdir(parents=True)
    assert _git_revision(inner) is None  # the branch has no commit yet
    (git / "packed-refs").write_text(f"# pack-refs with: peeled\n{SHA} refs/heads/main\n")
    assert _git_revision(inner) == SHA
    loose = "0" * 40
    (git / "refs" / "heads" / "main").write_text(loose + "\n")
    assert _git_revision(inner) == loose
    (git / "HEAD").write_text(SHA + "\n")  # a detached HEAD
    assert _git_revision(inner) == SHA
    assert _git_revision(Path("/")) is None


def test_pmsgate_version_prints_the_build_and_exits() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == str(build_info())
    assert result.output.startswith(f"pmsgate {build_info().version} (")


@pytest.mark.anyio
async def test_healthz_the_metric_and_the_admin_footer_agree(database_url: str) -> None:
    running = build_info()
    async with web_sandbox(database_url) as web:
        health = (await web.client.get("/healthz")).json()
        assert health == {"status": "ok", "version": running.version, "revision": running.revision}
        admin, _ = await web.signed_in("admin")
        page = await admin.get("/console")
        assert f'data-testid="build-info">{running}</footer>' in page.text
        customer, _ = await web.signed_in("customer")
        assert 'data-testid="build-info"' not in (await customer.get("/console")).text
    exposition = GatewayMetrics().render().decode()
    line = f'pmsgate_build_info{{revision="{running.revision}",version="{running.version}"}} 1.0'
    assert line in exposition, [x for x in exposition.splitlines() if "build_info" in x]
