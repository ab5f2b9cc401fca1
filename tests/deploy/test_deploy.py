"""deploy/ and the Dockerfile: the manifests parse and carry what an operator needs, and every
metric the dashboard and the alert rules use is one the proxy exports."""

import json
import re
from pathlib import Path

import yaml

from proxy import metrics
from proxy.monitor import exporter
from proxy.policy.loader import load_policy
from tests.servers import REPO

DEPLOY = Path(REPO) / "deploy"
HISTOGRAMS = {"redis_guard_command_duration_seconds", "redis_guard_upstream_rtt_seconds"}


def exported() -> set[str]:
    names = set(exporter.EXPORTED)
    for family in metrics.REGISTRY.collect():
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    for name in HISTOGRAMS:
        names |= {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    return names


def used(text: str) -> set[str]:
    return set(re.findall(r"\bredis_guard_[a-z0-9_]+", text))


def manifests() -> dict[str, dict]:
    found = {}
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            found[document["kind"]] = document
    return found


def test_the_dashboard_uses_only_exported_metrics():
    dashboard = json.loads((DEPLOY / "grafana" / "redis-guard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    names = set().union(*map(used, exprs))
    assert names and names <= exported(), names - exported()
    assert {"redis_guard_commands_total", "redis_guard_command_duration_seconds_bucket", "redis_guard_upstream_up",
            "redis_guard_policy_findings_total"} <= names


def test_the_alerts_use_only_exported_metrics_and_cover_the_failures():
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yaml").read_text())["groups"][0]["rules"]
    by_name = {rule["alert"]: rule for rule in rules}
    for rule in rules:
        assert used(rule["expr"]) <= exported(), (rule["alert"], used(rule["expr"]) - exported())
        assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"]
    assert "redis_guard_upstream_up" in by_name["RedisGuardUpstreamDown"]["expr"]
    assert 'result="refused"' in by_name["RedisGuardPolicyReloadRefused"]["expr"]
    assert "redis_guard_policy_findings_total" in by_name["RedisGuardFindingRateHigh"]["expr"]
    assert "redis_guard_command_duration_seconds_bucket" in by_name["RedisGuardLatencyHigh"]["expr"]


def test_the_deployment_runs_several_replicas_probed_bounded_and_unprivileged():
    found = manifests()
    assert set(found) == {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "Kustomization"}
    listed = set(found["Kustomization"]["resources"])
    assert listed == {path.name for path in (DEPLOY / "kubernetes").glob("*.yaml")} - {"kustomization.yaml"}
    deployment = found["Deployment"]
    assert deployment["spec"]["replicas"] >= 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports == {"redis": 6380, "redis-tls": 6381, "metrics": 9121}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert {"cpu", "memory"} <= set(container["resources"]["requests"]) and container["resources"]["limits"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    for kind in ("Service", "PodDisruptionBudget"):
        selector = found[kind]["spec"]["selector"]
        assert (selector.get("matchLabels") or selector).items() <= labels.items(), kind
    assert found["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1
    assert {port["port"] for port in found["Service"]["spec"]["ports"]} == {6380, 6381, 9121}


def test_a_tls_secret_is_mounted_as_a_directory_and_used():
    """cert-manager renews the Secret; the kubelet swaps the directory's files (never with subPath)
    and the proxy takes them for new connections."""
    pod = manifests()["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volume = next(volume for volume in pod["volumes"] if "secret" in volume)
    mount = next(mount for mount in container["volumeMounts"] if mount["name"] == volume["name"])
    assert "subPath" not in mount and mount["readOnly"] is True
    args = container["args"]
    for flag, key in (("--tls-cert-file", "tls.crt"), ("--tls-key-file", "tls.key"), ("--tls-ca-cert-file", "ca.crt")):
        assert args[args.index(flag) + 1] == f"{mount['mountPath']}/{key}"
    from proxy.cli import build_parser

    parsed = build_parser().parse_args(["serve", *args])  # flags the proxy knows
    assert parsed.tls_listen == "0.0.0.0:6381" and parsed.tls_auth_clients == "optional"


def test_the_policy_is_a_configmap_mounted_as_a_directory(tmp_path):
    """A subPath mount is never updated: hot reload needs the directory and its ..data symlink."""
    found = manifests()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volume = next(volume for volume in pod["volumes"] if "configMap" in volume)
    assert volume["configMap"]["name"] == found["ConfigMap"]["metadata"]["name"]
    mount = next(mount for mount in container["volumeMounts"] if mount["name"] == volume["name"])
    assert "subPath" not in mount
    policy_arg = container["args"][container["args"].index("--policy") + 1]
    assert Path(policy_arg).parent == Path(mount["mountPath"])
    (name, text), = found["ConfigMap"]["data"].items()
    assert Path(policy_arg).name == name
    (tmp_path / name).write_text(text)
    assert load_policy(str(tmp_path / name)).rules  # the shipped policy loads
    assert any(mount["mountPath"] == "/tmp" for mount in container["volumeMounts"])  # the workers' sockets


def dockerfile_stages() -> list[list[str]]:
    text = (Path(REPO) / "Dockerfile").read_text().replace("\\\n", " ")
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_the_dockerfile_is_multi_stage_non_root_with_a_healthcheck_and_no_source():
    stages = dockerfile_stages()
    assert len(stages) >= 2
    final = stages[-1]
    instructions = [line.split()[0].upper() for line in final]
    user = next(line.split()[1] for line in final if line.upper().startswith("USER "))
    assert user not in ("root", "0")
    healthcheck = next(line for line in final if line.upper().startswith("HEALTHCHECK "))
    assert "/healthz" in healthcheck and "9121" in healthcheck
    exposed = {port for line in final if line.upper().startswith("EXPOSE ") for port in line.split()[1:]}
    assert {"6380", "9121"} <= exposed
    copies = [line for line in final if line.upper().startswith("COPY ")]
    assert all("--from=" in line or line.split()[1].startswith("configs") for line in copies), copies
    assert "ENTRYPOINT" in instructions and "--metrics" in next(line for line in final if line.startswith("ENTRYPOINT"))


def test_the_image_is_built_without_tests_or_deploy_files():
    ignored = (Path(REPO) / ".dockerignore").read_text().split()
    assert {"tests", "deploy", "benchmarks"} <= set(ignored)


def test_the_image_builds_the_compiled_hot_path():
    """The build stage has setup.py and a C compiler, and says which modules it built; a
    developer's own in-place build never reaches the image."""
    build = " ".join(dockerfile_stages()[0])
    assert "setup.py" in build and "gcc" in build and "compiled.status()" in build
    ignored = (Path(REPO) / ".dockerignore").read_text().split()
    assert {"**/*.so", "proxy/**/*.c"} <= set(ignored)
