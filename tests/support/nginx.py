"""deploy/nginx/pmsgate.conf run by a test's own nginx: replicas and files on loopback."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

SITE = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "pmsgate.conf"


def write_nginx_conf(
    directory: Path, site: str, replicas: Sequence[int], *, foreground: bool = False
) -> Path:
    """Write ``site`` (replica N moved to 127.0.0.1:``replicas[N-1]``) and an nginx.conf
    that includes it, its pid, log and temp files all in ``directory``; the nginx.conf."""
    for index, port in enumerate(replicas, start=1):
        site = site.replace(f"gateway-{index}:8080", f"127.0.0.1:{port}")
    (directory / "site.conf").write_text(site, encoding="utf-8")
    temp = " ".join(
        f"{kind}_temp_path {directory / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf = directory / "nginx.conf"
    conf.write_text(
        ("user root;\n" if os.geteuid() == 0 else "")  # the temp paths are in root's tmp
        + ("daemon off;\n" if foreground else "")
        + f"pid {directory / 'nginx.pid'};\nerror_log {directory / 'error.log'};\n"
        + f"events {{}}\nhttp {{\naccess_log off;\n{temp}\n"
        + f"include {directory / 'site.conf'};\n}}\n",
        encoding="utf-8",
    )
    return conf
