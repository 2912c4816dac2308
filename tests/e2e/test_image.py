"""The image (Containerfile) built with podman and run as deployed: read-only, non-root.

Issue 15 item 1: the image starts, migrates, serves /readyz and answers a tool call against
the booking-system emulator, on this run's PostgreSQL and Redis (docs/deploy.md, "The
image"). `pmsgate sandbox` runs on the host; the containers reach the host's loopback
through slirp4netns (10.0.2.2), and the gateway's port 8080 is published on a free loopback
port, so the image runs with its own CMD and HEALTHCHECK unchanged.

No container registry is reachable here, so the base image is made locally: debootstrap
of Debian bookworm (its python3 is 3.11, pyproject's requires-python) with this machine's
CA bundle (PyPI is reached through it while building), imported with `podman import`. The
root file system is kept as a tarball under /var/cache/pmsgate-tests/, keyed by
BASE_VERSION and the CA bundle, and the imported image in podman's storage there, so only
the first run on a machine pays for debootstrap. Podman runs with runc and cgroupfs and
explicit ulimits (crun fails on this machine kind's hybrid cgroups), on overlay storage
where the kernel allows it, else on vfs (much slower: every layer a full copy).

podman, runc, slirp4netns and debootstrap come from Debian and are installed with apt-get
when missing; where that is impossible the test is skipped — except under CI=true (a
failure).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from pmsgate.gateway.vault import generate_key_spec
from pmsgate.version import build_info
from tests.conftest import IN_CI
from tests.e2e.processes import free_port, sandbox_process, scratch_database
from tests.support.servers import wait_until_answering

pytestmark = [pytest.mark.image, pytest.mark.postgres, pytest.mark.redis]

ROOT = Path(__file__).resolve().parents[2]
VERSION = build_info().version  # the image is built from this tree: the same version
REVISION = "0123456789abcdef0123456789abcdef01234567"
BUILD_ARGS = {"VERSION": VERSION, "REVISION": REVISION, "CREATED": "2026-11-26T00:00:00Z"}
CACHE = Path("/var/cache/pmsgate-tests")
# Bump when the recipe of the base image below changes (the cached tarball is then remade).
BASE_VERSION = "bookworm-1"
DEBIAN_MIRROR = "http://deb.debian.org/debian"  # the mirror of /etc/apt/sources.list.d here
DEBOOTSTRAP = [
    "debootstrap",
    "--variant=minbase",
    "--include=python3,python3-venv,python3-pip,ca-certificates",
    "bookworm",
]
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
PACKAGES = ("podman", "runc", "slirp4netns", "debootstrap")
# The storage drivers tried, in order: overlay (fast) where the kernel allows it, else vfs
# (always works: every layer and container is a full copy, so builds are slower).
DRIVERS = ("overlay", "vfs")


def podman_command(driver: str) -> list[str]:
    """podman with this machine kind's global flags and a storage of the tests' own."""
    return [
        "podman",
        "--root", str(CACHE / f"storage-{driver}"),
        "--runroot", f"/run/pmsgate-tests/{driver}",
        "--runtime", "runc",
        "--storage-driver", driver,
        "--cgroup-manager", "cgroupfs",
    ]  # fmt: skip


def _ulimit(name: str, kind: int, ceiling: int) -> list[str]:
    # Explicit limits (podman's defaults fail here), never above this process's hard limit.
    hard = resource.getrlimit(kind)[1]
    value = ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)
    return ["--ulimit", f"{name}={value}:{value}"]


ULIMITS = [
    *_ulimit("nofile", resource.RLIMIT_NOFILE, 65536),
    *_ulimit("nproc", resource.RLIMIT_NPROC, 16384),
]
# The host's loopback as seen from a container on slirp4netns with allow_host_loopback.
HOST_FROM_CONTAINER = "10.0.2.2"
UID = 10001


def _unavailable(message: str) -> None:
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def _apt_get(*args: str) -> bool:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(["apt-get", *args], env=env, capture_output=True, check=False)
    return done.returncode == 0


def _missing() -> list[str]:
    path = f"{os.environ.get('PATH', '')}:/usr/sbin:/usr/bin:/sbin"
    return [name for name in PACKAGES if shutil.which(name, path=path) is None]


def ensure_podman() -> None:
    """Debian's podman (runc, slirp4netns, debootstrap too), installed when missing."""
    if os.geteuid() != 0:
        _unavailable("the image test runs podman as root (its own storage, cgroupfs)")
    if not _missing():
        return
    with open("/tmp/pmsgate-podman-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _missing() and shutil.which("apt-get"):
            _apt_get("install", "-y", *PACKAGES) or (
                _apt_get("update") and _apt_get("install", "-y", *PACKAGES)
            )
    if _missing():
        _unavailable(f"not installed and not installable with apt-get: {', '.join(_missing())}")


def podman(
    engine: list[str], *args: str, timeout: float = 120, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """One podman command (``engine``: podman_command); fails the test when it fails."""
    done = subprocess.run(
        [*engine, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )
    assert done.returncode == 0, f"podman {args[0]}: {done.stderr[-3000:]}"
    return done


def base_tarball() -> tuple[Path, str]:
    """Debootstrapped bookworm with python3 as a tarball, made once per machine; its key."""
    ca = hashlib.sha256(CA_BUNDLE.read_bytes()).hexdigest()[:12] if CA_BUNDLE.exists() else "none"
    key = f"{BASE_VERSION}-{ca}"
    tarball = CACHE / f"pmsgate-base-{key}.tar"
    if tarball.exists():
        return tarball, key
    with tempfile.TemporaryDirectory(dir=CACHE, prefix="rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs"
        done = subprocess.run(
            [*DEBOOTSTRAP, str(rootfs), DEBIAN_MIRROR],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode != 0:
            _unavailable(f"debootstrap of bookworm failed: {done.stdout[-1500:]}")
        # What an image does not need: downloaded packages, apt lists, docs.
        for trash in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc",
                      "usr/share/man", "usr/share/locale"):  # fmt: skip
            for entry in (rootfs / trash).glob("*"):
                if entry.is_file() or entry.is_symlink():
                    entry.unlink()
                elif entry.name != "partial":
                    shutil.rmtree(entry)
        if CA_BUNDLE.exists():  # this machine's trust store: PyPI is reached through it
            shutil.copyfile(CA_BUNDLE, rootfs / "etc/ssl/certs/ca-certificates.crt")
        partial = tarball.with_suffix(".partial")
        subprocess.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."],
            check=True,
            timeout=300,
        )
        partial.rename(tarball)
    return tarball, key


def engine_and_base() -> tuple[list[str], str]:
    """The first storage driver that runs a container here, with the base image in it."""
    tarball, key = base_tarball()
    tag = f"localhost/pmsgate-base:{key}"
    problems = []
    for driver in DRIVERS:
        engine = podman_command(driver)
        steps = [
            [*engine, "image", "exists", tag],
            [
                *engine, "import",
                "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--change", "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
                "--change", "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt",
                "--change", 'CMD ["/bin/bash"]',
                str(tarball), tag,
            ],
        ]  # fmt: skip
        if subprocess.run(steps[0], capture_output=True, check=False).returncode != 0:
            imported = subprocess.run(
                steps[1], capture_output=True, text=True, timeout=300, check=False
            )
            if imported.returncode != 0:
                problems.append(f"{driver}: {imported.stderr[-500:]}")
                continue
        probe = subprocess.run(
            [*engine, "run", "--rm", *ULIMITS, "--network", "none", tag, "true"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if probe.returncode == 0:
            return engine, tag
        problems.append(f"{driver}: {probe.stderr[-500:]}")
    _unavailable(f"podman runs no container here: {problems}")
    raise AssertionError("unreachable")


@contextmanager
def built_image(engine: list[str], base: str) -> Iterator[str]:
    """The repository's Containerfile on the local base; removed afterwards.

    On overlay the steps are cached (the dependencies' layer is rebuilt only when uv.lock
    changes; cache entries older than a day are pruned). On vfs every committed layer is a
    full copy of the file system, so one commit per stage (--layers=false) is faster.
    """
    tag = f"localhost/pmsgate:test-{uuid.uuid4().hex[:8]}"
    layers = "--layers=false" if "vfs" in engine else "--layers=true"
    podman(
        engine,
        "build", layers, "--format", "docker", "--network", "host", *ULIMITS,
        "--build-arg", f"BASE_IMAGE={base}",
        *(f"--build-arg={name}={value}" for name, value in BUILD_ARGS.items()),
        "-f", str(ROOT / "Containerfile"), "-t", tag, str(ROOT),
        timeout=900,
    )  # fmt: skip
    try:
        yield tag
    finally:
        subprocess.run([*engine, "rmi", "-f", tag], capture_output=True, check=False)
        subprocess.run(
            [*engine, "image", "prune", "-f", "--filter", "until=24h"],
            capture_output=True,
            check=False,
        )


def from_container(url: str) -> str:
    """The same URL with the host's loopback as a container on slirp4netns reaches it."""
    parsed = make_url(url)
    if parsed.host in ("127.0.0.1", "localhost", "::1"):
        parsed = parsed.set(host=HOST_FROM_CONTAINER)
    return parsed.render_as_string(hide_password=False)


def test_the_image_migrates_serves_and_answers_a_tool_call(
    redis_url: str, redis_namespace: str
) -> None:
    ensure_podman()
    CACHE.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        # One image test per machine at a time: they share podman's storage and the cache.
        lock = stack.enter_context(open(CACHE / "image-test.lock", "w"))
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = time.monotonic()
        phases: dict[str, float] = {}  # seconds, printed for docs/deploy.md's figures

        def phase(name: str) -> None:
            phases[name] = round(time.monotonic() - started - sum(phases.values()), 1)

        engine, base = engine_and_base()
        phase(f"base image ({engine[engine.index('--storage-driver') + 1]})")
        image = stack.enter_context(built_image(engine, base))
        phase("build")
        database_url = stack.enter_context(scratch_database("pmsgate_test_image"))
        sandbox_port, facility = stack.enter_context(sandbox_process())
        # Settings reach podman through its environment (`-e NAME`): no secret in its argv.
        settings = {
            "PMSGATE_DATABASE_URL": from_container(database_url),
            "PMSGATE_REDIS_URL": from_container(redis_url),
            "PMSGATE_REDIS_NAMESPACE": redis_namespace,
            "PMSGATE_SECRET_KEYS": generate_key_spec("image"),
            "PMSGATE_KROSS_BASE_URL": f"http://{HOST_FROM_CONTAINER}:{sandbox_port}/kross",
            "PMSGATE_PARTNER_API_KEY": facility["api_key"],
            "PMSGATE_SCHEDULER_ENABLED": "false",
        }
        env = {**os.environ, **settings}
        # As deploy/compose.yaml runs it: read-only root, tmpfs for /tmp and the data dir.
        run_flags = [
            *ULIMITS, "--read-only", "--tmpfs", "/tmp", "--tmpfs", "/var/lib/pmsgate",
            "--network", "slirp4netns:allow_host_loopback=true",
            *(flag for name in settings for flag in ("-e", name)),
        ]  # fmt: skip

        podman(engine, "run", "--rm", *run_flags, image, "pmsgate", "db", "upgrade", env=env)
        phase("migration")

        port = free_port()
        name = f"pmsgate-image-test-{uuid.uuid4().hex[:8]}"
        published = ["-p", f"127.0.0.1:{port}:8080"]
        podman(engine, "run", "-d", "--name", name, *published, *run_flags, image, env=env)
        stack.callback(
            subprocess.run, [*engine, "rm", "-f", "-t", "5", name], capture_output=True, check=False
        )
        gateway = f"http://127.0.0.1:{port}"
        wait_until_answering(
            f"{gateway}/readyz",
            alive=lambda: (
                podman(engine, "inspect", "--format", "{{.State.Running}}", name).stdout.strip()
                == "true"
            ),
            within=120,
            failure=lambda: (
                "the container never became ready: "
                + subprocess.run(
                    [*engine, "logs", name], capture_output=True, text=True, check=False
                ).stderr[-3000:]
            ),
            ready=lambda answer: answer.status_code == 200,
            poll=0.2,
        )

        phase("ready")
        # The image's own CMD runs as its non-root user.
        assert podman(engine, "exec", name, "id", "-u").stdout.strip() == str(UID)
        top = podman(engine, "top", name, "user", "args").stdout
        assert "pmsgate serve --host 0.0.0.0 --port 8080" in top, top
        # Its HEALTHCHECK (podman's runner needs no systemd to run it once).
        inspected = json.loads(podman(engine, "image", "inspect", image).stdout)[0]
        healthcheck = inspected.get("Healthcheck") or inspected["Config"]["Healthcheck"]
        assert "/healthz" in " ".join(healthcheck["Test"]), healthcheck
        assert podman(engine, "healthcheck", "run", name).returncode == 0
        # Bytecode compiled at build time and valid: nothing to write on the read-only root.
        imports = podman(engine, "exec", name, "python", "-v", "-c", "import pmsgate.app")
        assert "code object from" in imports.stderr
        assert "bytecode is stale" not in imports.stderr
        # The optional traces are installed (UV_SYNC_EXTRAS' default): an endpoint is enough.
        otel = podman(engine, "exec", name, "python", "-c", "import opentelemetry.sdk.trace")
        assert otel.returncode == 0, otel.stderr[-500:]

        # A facility registered with the image's CLI, then a tool call through its server.
        added = podman(
            engine,
            "exec", "-i", name,
            "pmsgate", "facilities", "add",
            "--hotel-id", facility["hotel_id"],
            "--username", facility["username"],
            "--kind", "partner",
            "--integration-id", f"int-{facility['hotel_id']}",
            "--password-stdin", "--json",
            input=facility["password"] + "\n",
        )  # fmt: skip
        key = json.loads(added.stdout)["gateway_key"]
        answer = httpx.post(
            f"{gateway}/v1/tools/get-in-house-guests",
            json={},
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        assert isinstance(answer.json()["data"]["reservations"], list)
        # Answered by the emulator on the host: the gateway logged in there, once.
        stats = httpx.get(f"http://127.0.0.1:{sandbox_port}/kross/_sandbox/stats").json()
        assert stats["tokens_issued"]["by_hotel"] == {facility["hotel_id"]: 1}
        phase("checks and tool call")

        # One version everywhere: the labels, the CLI, /healthz and the build-info metric.
        labels = inspected["Config"]["Labels"]
        assert labels["org.opencontainers.image.version"] == VERSION
        assert labels["org.opencontainers.image.revision"] == REVISION
        printed = podman(engine, "exec", name, "pmsgate", "--version").stdout.strip()
        assert printed == f"pmsgate {VERSION} ({REVISION[:12]})", printed
        health = httpx.get(f"{gateway}/healthz", timeout=5).json()
        assert (health["version"], health["revision"]) == (VERSION, REVISION)
        print(f"image test phases (s): {phases}")
