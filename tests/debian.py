"""A Debian package's program for a test: found on PATH, or installed with apt-get once.

Tests that drive a real tool from Debian (``promtool`` from ``prometheus``, ``nginx`` from
``nginx-light``) call :func:`debian_program`: when the program is missing and this is root
on a machine with apt-get, the package is installed (one installer at a time across test
processes); where it cannot be, the test is skipped — except under CI=true (a failure).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess

import pytest

from tests.conftest import IN_CI

SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _apt_get(*args: str) -> bool:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", *args]
    return subprocess.run(command, env=env, capture_output=True, check=False).returncode == 0


def debian_program(program: str, package: str) -> str:
    """The path of ``program``, installing ``package`` when missing (skip, or fail under CI)."""
    found = shutil.which(program) or shutil.which(program, path=SEARCH_PATH)
    if found:
        return found
    with open(f"/tmp/pmsgate-{package}-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        install = ("install", "-y", "--no-install-recommends", package)
        if (
            shutil.which("apt-get")
            and os.geteuid() == 0
            and (_apt_get(*install) or (_apt_get("update") and _apt_get(*install)))
        ):
            found = shutil.which(program, path=SEARCH_PATH)
            if found:
                return found
    message = f"{program} (Debian: {package}) is not installed and apt-get could not install it"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)
