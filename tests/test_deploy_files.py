"""The deployment files (deploy/compose.yaml, deploy/nginx, deploy/k8s) stay true to the app.

They are read by no code of ours, so nothing else notices when a setting is renamed, a
health route moves or the migration loses its place before the replicas; this test does
(docs/deploy.md). It also keeps real secrets out of them: only placeholders.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.config import Settings
from pmsgate.web import auth as web_auth

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
PLACEHOLDER = "CHANGE-ME"
REPLICAS = ("gateway-1", "gateway-2")


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def compose() -> dict[str, Any]:
    document = load(DEPLOY / "compose.yaml")
    assert isinstance(document, dict)
    return document


def k8s_documents() -> dict[str, dict[str, Any]]:
    """Every manifest kustomization.yaml lists, by kind."""
    kustomization = load(DEPLOY / "k8s" / "kustomization.yaml")
    by_kind: dict[str, dict[str, Any]] = {}
    for name in kustomization["resources"]:
        document = load(DEPLOY / "k8s" / name)
        by_kind[document["kind"]] = document
    return by_kind


def env_file(path: Path) -> dict[str, str]:
    pairs = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            pairs[name.strip()] = value.strip()
    return pairs


def nginx_directives(text: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """Each directive of an nginx file (comments dropped) with the blocks it sits in."""
    text = re.sub(r"#[^\n]*", "", text)
    directives: list[tuple[tuple[str, ...], list[str]]] = []
    context: list[str] = []
    for token in re.findall(r"[^;{}]+[;{]|}", text):
        if token == "}":
            assert context, "a } closes no block"
            context.pop()
            continue
        words = token[:-1].split()
        if token.endswith("{"):
            context.append(" ".join(words))
        else:
            directives.append((tuple(context), words))
    assert not context, f"unclosed blocks: {context}"
    return directives


def every_setting_set() -> dict[str, dict[str, str]]:
    """The PMSGATE_* variables each file sets, with their values."""
    services = compose()["services"]
    manifests = k8s_documents()
    found: dict[str, dict[str, str]] = {
        "pmsgate.env.example": env_file(DEPLOY / "pmsgate.env.example"),
        "k8s ConfigMap": manifests["ConfigMap"]["data"],
        "k8s Secret": manifests["Secret"]["stringData"],
    }
    for name, service in services.items():
        environment = service.get("environment") or {}
        found[f"compose {name}"] = {k: str(v) for k, v in environment.items()}
    return {
        where: {k: v for k, v in values.items() if k.startswith("PMSGATE_")}
        for where, values in found.items()
    }


def test_every_variable_set_is_a_setting_and_its_value_is_valid() -> None:
    known = {f"PMSGATE_{name.upper()}": name for name in Settings.model_fields}
    for where, values in every_setting_set().items():
        unknown = sorted(set(values) - set(known))
        assert not unknown, f"{where} sets variables Settings does not have: {unknown}"
        real = {known[k]: v for k, v in values.items() if PLACEHOLDER not in v}
        Settings(**real)  # a value the settings would refuse at start-up fails here


def test_no_secret_value_is_committed() -> None:
    secret = {
        f"PMSGATE_{name.upper()}"
        for name, field in Settings.model_fields.items()
        if SecretStr in getattr(field.annotation, "__args__", (field.annotation,))
    } | {"PMSGATE_DATABASE_URL"}  # carries the database password
    for where, values in every_setting_set().items():
        for name in secret & set(values):
            assert PLACEHOLDER in values[name], (
                f"{where}: {name} must be a {PLACEHOLDER} placeholder"
            )


def routes() -> set[str]:
    return {getattr(route, "path", "") for route in create_app(Settings()).routes}


def test_probes_ask_routes_the_app_serves() -> None:
    served = routes()
    services = compose()["services"]
    for name in REPLICAS:
        probe = " ".join(services[name]["healthcheck"]["test"])
        paths = re.findall(r"127\.0\.0\.1:8080(/\w+)", probe)
        assert paths == ["/readyz"], probe
    container = k8s_documents()["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] in served
    assert "/readyz" in served


def test_the_migration_runs_to_completion_before_the_replicas_start() -> None:
    services = compose()["services"]
    migrate = services["migrate"]
    assert [*migrate["entrypoint"], *migrate["command"]] == ["pmsgate", "db", "upgrade"]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in REPLICAS:
        replica = services[name]
        assert [*replica["entrypoint"], *replica["command"]][:2] == ["pmsgate", "serve"]
        assert replica["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert replica["build"] == {"context": "..", "dockerfile": "Containerfile"}
        assert replica["image"] == "pmsgate:local"
        assert replica["env_file"] == "pmsgate.env"
        assert replica["read_only"] is True
    for name in REPLICAS:
        assert services["nginx"]["depends_on"][name]["condition"] == "service_healthy"
    job = k8s_documents()["Job"]["spec"]["template"]["spec"]["containers"][0]
    assert job["command"] == ["pmsgate", "db", "upgrade"]


def test_the_replicas_trust_forwarded_headers_from_the_proxy_only() -> None:
    document = compose()
    services = document["services"]
    proxy = services["nginx"]["networks"]["front"]["ipv4_address"]
    for name in REPLICAS:
        assert services[name]["environment"]["PMSGATE_FORWARDED_ALLOW_IPS"] == proxy
        assert "front" in services[name]["networks"]
    for service in ("postgres", "redis", "migrate"):  # nothing else sits beside the proxy
        assert "front" not in services[service]["networks"]
    ports = [port for service in services.values() for port in service.get("ports", [])]
    assert ports == ["80:80"], "only the proxy is published"


def test_nginx_balances_both_replicas_and_keeps_metrics_private() -> None:
    directives = nginx_directives((DEPLOY / "nginx" / "pmsgate.conf").read_text(encoding="utf-8"))
    servers = [
        words[1]
        for context, words in directives
        if context == ("upstream pmsgate",) and words[0] == "server"
    ]
    assert servers == [f"{name}:8080" for name in REPLICAS]
    in_root = [words for context, words in directives if context == ("server", "location /")]
    assert ["proxy_pass", "http://pmsgate"] in in_root
    # The forwarded headers are set once for the server; a location that set any header of
    # its own would inherit none of them (nginx's rule), so none does.
    in_server = [words for context, words in directives if context == ("server",)]
    assert ["proxy_set_header", "X-Forwarded-For", "$proxy_add_x_forwarded_for"] in in_server
    assert ["proxy_set_header", "X-Forwarded-Proto", "$scheme"] in in_server
    in_locations = [
        words for context, words in directives if context[1:2] != () and context[0] == "server"
    ]
    assert not [words for words in in_locations if words[0] == "proxy_set_header"]
    # One-time sign-in links carry their token in the path: never in the access log.
    link = [
        words for context, words in directives if context == ("server", "location ^~ /login/link/")
    ]
    assert ["access_log", "off"] in link and ["proxy_pass", "http://pmsgate"] in link
    assert "/login/link/{token}" in {getattr(r, "path", "") for r in web_auth.router.routes}
    metrics = [
        words for context, words in directives if context == ("server", "location = /metrics")
    ]
    assert metrics == [["return", "404"]]
    assert "/metrics" in routes()  # what is hidden does exist on the app


def test_the_k8s_deployment_is_replicated_and_locked_down() -> None:
    manifests = k8s_documents()
    listed = set(load(DEPLOY / "k8s" / "kustomization.yaml")["resources"])
    on_disk = {path.name for path in (DEPLOY / "k8s").glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    deployment = manifests["Deployment"]["spec"]
    assert deployment["replicas"] == 2
    pod = deployment["template"]["spec"]
    for spec in (pod, manifests["Job"]["spec"]["template"]["spec"]):
        assert spec["securityContext"]["runAsNonRoot"] is True
        for container in spec["containers"]:
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert container["resources"]["requests"] and container["resources"]["limits"]
            sources = {next(iter(ref.values()))["name"] for ref in container["envFrom"]}
            assert sources == {"pmsgate-config", "pmsgate-secrets"}
    assert manifests["ConfigMap"]["metadata"]["name"] == "pmsgate-config"
    assert manifests["Secret"]["metadata"]["name"] == "pmsgate-secrets"
    service_ports = {port["name"] for port in manifests["Service"]["spec"]["ports"]}
    assert service_ports == {"http", "metrics"}
    backends = [
        path["backend"]["service"]["port"]["name"]
        for rule in manifests["Ingress"]["spec"]["rules"]
        for path in rule["http"]["paths"]
    ]
    assert backends == ["http"]
