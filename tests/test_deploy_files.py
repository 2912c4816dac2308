"""The deployment files (deploy/compose.yaml, deploy/nginx, deploy/k8s, deploy/prometheus)
stay true to the app and to what a platform team accepts.

They are read by no code of ours, so nothing else notices when a setting is renamed, a
health route moves or the migration loses its place before the replicas; this test does
(docs/deploy.md). It also keeps real secrets out of them (only placeholders, and no Secret
at all in what `kubectl apply -k` applies), renders both Kubernetes overlays with
`kubectl kustomize` and validates every object with ``kubernetes-validate --strict`` against
the oldest and the newest Kubernetes the docs name, and checks what the manifests promise:
a disruption budget, network policies, no service-account token, replicas spread over
nodes, a grace period that covers the longest request, a metrics port only Prometheus
reaches and that requires its token.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import SecretStr

from pmsgate.app import create_app
from pmsgate.config import Settings, is_loopback_host, split_host_port
from pmsgate.web import login as web_login
from tests.conftest import IN_CI
from tests.debian import debian_program

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
OVERLAYS = ("prod", "dev")
# The oldest Kubernetes the manifests are written for (docs/deploy.md: matchLabelKeys and
# nodeTaintsPolicy in topology spread are on by default from 1.27) and the newest schema
# kubernetes-validate has.
KUBERNETES_VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
PLACEHOLDER = "CHANGE-ME"
REPLICAS = ("gateway-1", "gateway-2")
GATEWAY_POD = {"app.kubernetes.io/name": "pmsgate", "app.kubernetes.io/component": "gateway"}
SECRET_NAME = "pmsgate-secrets"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def compose() -> dict[str, Any]:
    document = load(DEPLOY / "compose.yaml")
    assert isinstance(document, dict)
    return document


@cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    """What `kubectl apply -k deploy/k8s/overlays/<overlay>` would apply."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        message = "kubectl is not installed: the Kubernetes overlays cannot be rendered"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    built = subprocess.run(
        [kubectl, "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return tuple(document for document in yaml.safe_load_all(built.stdout) if document)


def one(documents: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [
        document
        for document in documents
        if document["kind"] == kind and (name is None or document["metadata"]["name"] == name)
    ]
    return found


def kinds(documents: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(document["kind"] for document in documents)


def pod_specs(documents: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        document["spec"]["template"]["spec"]
        for document in documents
        if document["kind"] in {"Deployment", "Job"}
    ]


def secret_example() -> dict[str, str]:
    document = load(K8S / "secret.example.yaml")
    assert document["kind"] == "Secret" and document["metadata"]["name"] == SECRET_NAME
    return dict(document["stringData"])


def env_file(path: Path) -> dict[str, str]:
    pairs = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            pairs[name.strip()] = value.strip()
    return pairs


def nginx_directives(text: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """Each directive of an nginx file (comments dropped) with the blocks it sits in."""
    import re

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


def only_settings(values: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in values.items() if k.startswith("PMSGATE_")}


def every_setting_set() -> dict[str, dict[str, str]]:
    """The PMSGATE_* variables each place sets, with their values."""
    found: dict[str, dict[str, str]] = {
        "pmsgate.env.example": env_file(DEPLOY / "pmsgate.env.example"),
        "k8s secret.example.yaml": secret_example(),
    }
    for overlay in OVERLAYS:
        found[f"k8s {overlay} ConfigMap"] = one(rendered(overlay), "ConfigMap")["data"]
    for name, service in compose()["services"].items():
        found[f"compose {name}"] = service.get("environment") or {}
    return {where: only_settings(values) for where, values in found.items()}


def what_a_process_reads() -> dict[str, dict[str, str]]:
    """The whole environment of each kind of process the files start."""
    example = env_file(DEPLOY / "pmsgate.env.example")
    units = {
        f"k8s {overlay} pod": {**one(rendered(overlay), "ConfigMap")["data"], **secret_example()}
        for overlay in OVERLAYS
    }
    for name in ("migrate", *REPLICAS):
        units[f"compose {name}"] = {**example, **compose()["services"][name]["environment"]}
    return {where: only_settings(values) for where, values in units.items()}


def secret_settings() -> set[str]:
    return {
        f"PMSGATE_{name.upper()}"
        for name, field in Settings.model_fields.items()
        if SecretStr in getattr(field.annotation, "__args__", (field.annotation,))
    } | {"PMSGATE_DATABASE_URL", "PMSGATE_REDIS_URL"}  # both may carry a password


# --- the settings the files set --------------------------------------------------------------


def test_every_variable_set_is_a_setting_and_every_process_starts_with_its_settings() -> None:
    known = {f"PMSGATE_{name.upper()}": name for name in Settings.model_fields}
    for where, values in every_setting_set().items():
        unknown = sorted(set(values) - set(known))
        assert not unknown, f"{where} sets variables Settings does not have: {unknown}"
    # Each process's environment as a whole: a value the settings would refuse at start-up
    # (or a combination, such as a metrics address beyond the pod without the token) fails
    # here. A placeholder stands for a secret the operator fills in: a token or key is
    # given a stand-in, a URL keeps it as its password.
    stand_in = "stand-in-for-a-real-secret-0123456789"
    for where, values in what_a_process_reads().items():
        real = {known[k]: (stand_in if v == PLACEHOLDER else v) for k, v in values.items()}
        try:
            Settings(**real)
        except ValueError as error:
            pytest.fail(f"{where}: {error}")


def test_no_secret_value_is_committed() -> None:
    for where, values in every_setting_set().items():
        for name in secret_settings() & set(values):
            if where.startswith("compose") and name == "PMSGATE_REDIS_URL":
                continue  # compose's Redis has no password: it is on the backend network only
            assert PLACEHOLDER in values[name], (
                f"{where}: {name} must be a {PLACEHOLDER} placeholder"
            )


# --- compose ---------------------------------------------------------------------------------


def routes() -> set[str]:
    return {getattr(route, "path", "") for route in create_app(Settings()).routes}


def test_probes_ask_routes_the_app_serves() -> None:
    served = routes()
    services = compose()["services"]
    for name in REPLICAS:
        probe = " ".join(services[name]["healthcheck"]["test"])
        assert "127.0.0.1:8080/readyz" in probe, probe
    for overlay in OVERLAYS:
        container = one(rendered(overlay), "Deployment")["spec"]["template"]["spec"]["containers"]
        assert container[0]["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container[0]["livenessProbe"]["httpGet"]["path"] in served
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


def test_the_replicas_trust_forwarded_headers_from_the_proxy_only() -> None:
    document = compose()
    services = document["services"]
    proxy = services["nginx"]["networks"]["front"]["ipv4_address"]
    for name in REPLICAS:
        assert services[name]["environment"]["PMSGATE_FORWARDED_ALLOW_IPS"] == proxy
        assert "front" in services[name]["networks"]
    for service in ("postgres", "redis", "migrate", "prometheus"):  # nothing else beside it
        assert "front" not in services[service]["networks"]
    ports = [port for service in services.values() for port in service.get("ports", [])]
    assert ports == ["80:80"], "only the proxy is published"


def test_compose_prometheus_scrapes_each_replicas_metrics_port_with_the_token() -> None:
    services = compose()["services"]
    address = services[REPLICAS[0]]["environment"]["PMSGATE_METRICS_ADDRESS"]
    host, port = split_host_port(address)
    assert not is_loopback_host(host)  # reached from the prometheus container: token needed
    assert "PMSGATE_METRICS_TOKEN" in env_file(DEPLOY / "pmsgate.env.example")
    prometheus = services["prometheus"]
    assert prometheus["profiles"] == ["monitoring"]
    assert prometheus["networks"] == ["backend"]
    assert prometheus["secrets"] == ["metrics_token"]
    assert "./prometheus:/etc/prometheus:ro" in prometheus["volumes"]
    config = load(DEPLOY / "prometheus" / "prometheus.yml")
    (job,) = config["scrape_configs"]
    assert job["job_name"] == "pmsgate"  # what the alert rules assume
    assert job["authorization"]["credentials_file"] == "/run/secrets/metrics_token"
    assert job["static_configs"][0]["targets"] == [f"{name}:{port}" for name in REPLICAS]
    assert config["rule_files"] == ["alerts.yaml"]


def test_promtool_accepts_the_compose_prometheus_configuration(tmp_path: Path) -> None:
    promtool = debian_program("promtool", "prometheus")
    for name in ("prometheus.yml", "alerts.yaml"):
        shutil.copy(DEPLOY / "prometheus" / name, tmp_path / name)
    token = tmp_path / "metrics_token"  # promtool checks that the credentials file exists
    token.write_text("a-token-for-the-check-only\n", encoding="utf-8")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        config.read_text(encoding="utf-8").replace("/run/secrets/metrics_token", str(token)),
        encoding="utf-8",
    )
    checked = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


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
    assert "/login/link/{token}" in {getattr(r, "path", "") for r in web_login.router.routes}
    metrics = [
        words for context, words in directives if context == ("server", "location = /metrics")
    ]
    assert metrics == [["return", "404"]]
    assert "/metrics" in routes()  # what is hidden does exist on the app


# --- Kubernetes ------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_overlay_renders_and_every_object_validates_strictly(overlay: str) -> None:
    documents = rendered(overlay)
    assert {"Deployment", "Job", "Service", "NetworkPolicy", "ServiceAccount"} <= set(
        kinds(documents)
    )
    for version in KUBERNETES_VERSIONS:
        for document in documents:
            try:
                kubernetes_validate.validate(document, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                name = f"{document['kind']}/{document['metadata']['name']}"
                pytest.fail(f"{overlay}: {name} is not valid Kubernetes {version}: {error}")


def test_strict_validation_would_see_a_misspelt_field() -> None:
    deployment = copy.deepcopy(one(rendered("prod"), "Deployment"))
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[0], strict=True)


def test_the_base_lists_every_manifest_and_no_secret_is_applied() -> None:
    listed = set(load(K8S / "base" / "kustomization.yaml")["resources"])
    on_disk = {path.name for path in (K8S / "base").glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    for overlay in OVERLAYS:
        documents = rendered(overlay)
        assert "Secret" not in kinds(documents), "apply -k would overwrite the real Secret"
        for spec in pod_specs(documents):
            for container in spec["containers"]:
                sources = {next(iter(ref.values()))["name"] for ref in container["envFrom"]}
                assert sources == {"pmsgate-config", SECRET_NAME}
        configmap = one(documents, "ConfigMap")["data"]
        assert not secret_settings() & set(configmap), "a secret setting in the ConfigMap"
    # The example lists every secret a pod needs, the Redis URL with its password among them.
    example = secret_example()
    assert {
        "PMSGATE_DATABASE_URL",
        "PMSGATE_REDIS_URL",
        "PMSGATE_SECRET_KEYS",
        "PMSGATE_ADMIN_TOKEN",
        "PMSGATE_METRICS_TOKEN",
    } <= set(example)
    assert example["PMSGATE_REDIS_URL"].startswith(f"redis://:{PLACEHOLDER}@")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_migration_job_is_released_with_the_image_and_a_name_of_its_own(overlay: str) -> None:
    documents = rendered(overlay)
    deployment = one(documents, "Deployment")
    job = one(documents, "Job")
    version = deployment["metadata"]["labels"]["app.kubernetes.io/version"]
    assert job["metadata"]["name"] == f"pmsgate-migrate-{version}"
    assert job["metadata"]["labels"]["app.kubernetes.io/version"] == version
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    (migrate,) = job["spec"]["template"]["spec"]["containers"]
    assert migrate["image"] == image, "the image override does not reach the migration"
    assert migrate["command"] == ["pmsgate", "db", "upgrade"]
    if overlay == "prod":
        assert "@sha256:" in image, "production runs an image pinned by digest"
    # The version changes every release: it must not be in the Deployment's (immutable)
    # selector, nor select pods across releases.
    assert "app.kubernetes.io/version" not in deployment["spec"]["selector"]["matchLabels"]
    # Step 1 of an upgrade applies everything but the gateway (docs/deploy.md, Upgrades):
    # the Job and what it needs, and nothing that starts or routes to the new replicas.
    first = [
        document
        for document in documents
        if document["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "gateway"
    ]
    assert kinds(first) == ["ConfigMap", "Job", "NetworkPolicy", "ServiceAccount"]


def test_production_is_spread_budgeted_and_drained_without_cutting_a_request() -> None:
    documents = rendered("prod")
    deployment = one(documents, "Deployment")["spec"]
    assert deployment["replicas"] == 2
    assert deployment["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = deployment["template"]
    assert pod["metadata"]["labels"].items() >= GATEWAY_POD.items()
    budget = one(documents, "PodDisruptionBudget")["spec"]
    assert budget["minAvailable"] == 1
    assert budget["selector"]["matchLabels"] == GATEWAY_POD
    spec = pod["spec"]
    (by_node,) = [
        constraint
        for constraint in spec["topologySpreadConstraints"]
        if constraint["topologyKey"] == "kubernetes.io/hostname"
    ]
    assert by_node["whenUnsatisfiable"] == "DoNotSchedule" and by_node["maxSkew"] == 1
    assert by_node["nodeTaintsPolicy"] == "Honor"
    assert by_node["matchLabelKeys"] == ["pod-template-hash"]
    assert by_node["labelSelector"]["matchLabels"] == GATEWAY_POD
    assert "podAntiAffinity" not in spec.get("affinity", {})  # would stall a 2-node rollout
    # The grace period covers the preStop pause plus the longest request.
    (container,) = spec["containers"]
    pause = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pause[0] == "sleep"
    longest = float(one(documents, "ConfigMap")["data"]["PMSGATE_SYNC_MAX_DURATION_S"])
    assert longest == Settings().sync_max_duration_s  # the ConfigMap states the default
    assert spec["terminationGracePeriodSeconds"] >= int(pause[1]) + longest + 10
    timeout = one(documents, "Ingress")["metadata"]["annotations"]
    assert float(timeout["nginx.ingress.kubernetes.io/proxy-read-timeout"]) > longest


def test_the_dev_overlay_runs_one_replica_without_a_budget_that_would_block_drains() -> None:
    documents = rendered("dev")
    assert one(documents, "Deployment")["spec"]["replicas"] == 1
    assert "PodDisruptionBudget" not in kinds(documents)
    assert "Ingress" not in kinds(documents)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_are_locked_down(overlay: str) -> None:
    documents = rendered(overlay)
    account = one(documents, "ServiceAccount")
    assert account["automountServiceAccountToken"] is False
    for spec in pod_specs(documents):
        assert spec["serviceAccountName"] == account["metadata"]["name"]
        assert spec["automountServiceAccountToken"] is False
        assert spec["securityContext"]["runAsNonRoot"] is True
        for container in spec["containers"]:
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert container["resources"]["requests"] and container["resources"]["limits"]
        for volume in spec["volumes"]:
            assert volume["emptyDir"]["sizeLimit"], volume["name"]
    assert not [d for d in documents if d["kind"] in {"Role", "RoleBinding", "ClusterRole"}]


def test_only_the_ingress_controller_and_prometheus_reach_the_gateway() -> None:
    documents = rendered("prod")
    service = one(documents, "Service")
    assert [port["name"] for port in service["spec"]["ports"]] == ["http"]
    backends = [
        path["backend"]["service"]["port"]["name"]
        for rule in one(documents, "Ingress")["spec"]["rules"]
        for path in rule["http"]["paths"]
    ]
    assert backends == ["http"]
    policy = one(documents, "NetworkPolicy", "pmsgate-gateway")["spec"]
    assert policy["podSelector"]["matchLabels"] == GATEWAY_POD
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    allowed = {
        rule["ports"][0]["port"]: (
            rule["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            rule["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        )
        for rule in policy["ingress"]
    }
    assert allowed == {
        "http": ("ingress-nginx", "ingress-nginx"),
        "metrics": ("monitoring", "prometheus"),
    }
    assert all(len(rule["ports"]) == 1 and len(rule["from"]) == 1 for rule in policy["ingress"])
    egress = {port["port"] for rule in policy["egress"] for port in rule["ports"]}
    assert egress == {53, 5432, 6379, 443}
    migrate = one(documents, "NetworkPolicy", "pmsgate-migrate")["spec"]
    assert migrate["ingress"] == []
    assert {port["port"] for rule in migrate["egress"] for port in rule["ports"]} == {53, 5432}
    # The metrics port listens beyond the pod: the app refuses to start without the token,
    # which the Secret's example holds (checked whole in the settings test above).
    ports = {
        port["name"]: port["containerPort"]
        for port in one(documents, "Deployment")["spec"]["template"]["spec"]["containers"][0][
            "ports"
        ]
    }
    configmap = one(documents, "ConfigMap")["data"]
    host, port = split_host_port(configmap["PMSGATE_METRICS_ADDRESS"])
    assert port == ports["metrics"] and not is_loopback_host(host)
    assert "PMSGATE_METRICS_TOKEN" in secret_example()


def test_the_kubernetes_scrape_job_finds_the_gateway_pods_metrics_port() -> None:
    documents = rendered("prod")
    namespace = one(documents, "Deployment")["metadata"]["namespace"]
    config = load(DEPLOY / "prometheus" / "prometheus-kubernetes.yml")
    (job,) = config["scrape_configs"]
    assert job["job_name"] == "pmsgate"
    assert job["authorization"]["credentials_file"]
    (discovery,) = job["kubernetes_sd_configs"]
    assert discovery["role"] == "pod" and discovery["namespaces"]["names"] == [namespace]
    (selector,) = discovery["selectors"]
    assert selector["label"] == ",".join(f"{k}={v}" for k, v in GATEWAY_POD.items())
    keep = {
        tuple(rule["source_labels"]): rule["regex"]
        for rule in job["relabel_configs"]
        if rule.get("action") == "keep"
    }
    assert keep[("__meta_kubernetes_pod_container_port_name",)] == "metrics"
    instance = [rule for rule in job["relabel_configs"] if rule.get("target_label") == "instance"]
    assert instance and instance[0]["source_labels"] == ["__meta_kubernetes_pod_name"]
