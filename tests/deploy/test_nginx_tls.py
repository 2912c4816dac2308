"""deploy/nginx/pmsgate.conf's TLS server block, uncommented, passes Debian's ``nginx -t``.

The block ships commented (compose.yaml has no certificate to give it), so nothing else
would notice it going invalid — as ``http2 on;`` did, an unknown directive before nginx
1.25.1 (Debian 12 has 1.22). The committed form (``listen 443 ssl http2;``) must pass on
the nginx installed here; the form its comment offers for nginx ≥ 1.25.1 (``http2 on;``)
must pass exactly when the installed nginx is that recent, as the comment says.
"""

from __future__ import annotations

import datetime
import re
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.debian import debian_program
from tests.support.nginx import SITE as CONF
from tests.support.nginx import write_nginx_conf

CERTS = "/etc/nginx/certs"


def tls_block(text: str) -> str:
    """The commented ``server { … }`` at the end of the file, uncommented."""
    lines = text.splitlines()
    start = lines.index("# server {")
    block = [re.sub(r"^# ?", "", line) for line in lines[start:]]
    assert block[-1] == "}", "the TLS block is the file's last, ending with '# }'"
    return "\n".join(block) + "\n"


def self_signed(directory: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gateway.example.com")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (directory / "fullchain.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (directory / "privkey.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def nginx_test(binary: str, directory: Path, site: str) -> subprocess.CompletedProcess[str]:
    """``nginx -t`` of the site (replicas on loopback, certificates in ``directory``)."""
    conf = write_nginx_conf(directory, site.replace(CERTS, str(directory)), [18081, 18082])
    return subprocess.run(
        [binary, "-t", "-c", str(conf), "-p", str(directory)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def version(binary: str) -> tuple[int, ...]:
    shown = subprocess.run([binary, "-v"], capture_output=True, text=True, check=True).stderr
    found = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", shown)
    assert found, shown
    return tuple(int(part) for part in found.groups())


def test_the_tls_block_passes_nginx_t_and_its_comment_tells_the_truth(tmp_path: Path) -> None:
    binary = debian_program("nginx", "nginx-light")
    self_signed(tmp_path)
    text = CONF.read_text(encoding="utf-8")
    block = tls_block(text)
    assert "listen 443 ssl http2;" in block
    committed = nginx_test(binary, tmp_path, text + block)
    assert committed.returncode == 0, committed.stderr
    # The form the comment gives for nginx ≥ 1.25.1.
    assert "#     listen 443 ssl;\n#     http2 on;" in text
    newer = block.replace("listen 443 ssl http2;", "listen 443 ssl;\n    http2 on;")
    recent = nginx_test(binary, tmp_path, text + newer)
    if version(binary) >= (1, 25, 1):
        assert recent.returncode == 0, recent.stderr
    else:
        assert recent.returncode != 0 and 'unknown directive "http2"' in recent.stderr
