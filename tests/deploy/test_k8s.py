"""deploy/k8s/: the base and the production overlay built with `kubectl kustomize`, every object validated against
the Kubernetes schemas (kubernetes-validate, strict: no unknown fields) of the oldest and newest versions the
manifests support, and what the API needs of them checked: probes, a shutdown that drains, non-root on a read-only
filesystem, resources, one migration Job, the ingest's CronJobs one at a time, and no secret in them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import cache
from typing import Any

import kubernetes_validate
import pytest
import yaml

from settings import load_settings
from tests.deploy.compose import ROOT
from tests.deploy.test_compose import OTHER_VARIABLES, setting_names

K8S = ROOT / "deploy" / "k8s"
BUILDS = {"base": K8S / "base", "production": K8S / "overlays" / "production"}
# CronJob.spec.timeZone is GA from 1.27; 1.30 is the oldest release its providers still support.
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
# Where the API's workers keep their metrics: an emptyDir.
METRICS_DIR = "/run/wovepaper/metrics"
SECRET = "wovepaper-secrets"
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|API_KEY|^DATABASE_URL$|^REDIS_URL$|REPLICA_URLS")


@cache
def build(name: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is required in CI to build the kustomizations")
        pytest.skip("kubectl not found: the kustomizations are not built here (install kubectl to check them)")
    result = subprocess.run([kubectl, "kustomize", str(BUILDS[name])], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind} {name}: {len(found)}"
    return found[0]


def pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every pod template, by its object's kind and name."""
    specs = {}
    for doc in docs:
        spec = doc.get("spec", {})
        if doc["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        if "template" in spec:
            specs[f"{doc['kind']}/{doc['metadata']['name']}"] = spec["template"]["spec"]
    return specs


def config(docs: list[dict[str, Any]]) -> dict[str, str]:
    return dict(one(docs, "ConfigMap")["data"])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", BUILDS)
def test_every_object_is_valid_kubernetes(name: str, version: str) -> None:
    docs = build(name)
    assert {d["kind"] for d in docs} >= {
        "ServiceAccount", "ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget",
        "Job", "CronJob",
    }  # fmt: skip
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("name", BUILDS)
def test_the_api_probes_and_a_shutdown_that_drains(name: str) -> None:
    docs = build(name)
    deployment = one(docs, "Deployment", "wovepaper-api")
    pod = deployment["spec"]["template"]["spec"]
    (api,) = [c for c in pod["containers"] if c["name"] == "api"]
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert api["startupProbe"]["httpGet"]["path"] == "/healthz"
    # The probes reach the port the API listens on.
    assert api["args"][:1] == ["serve"] and api["args"][api["args"].index("--port") + 1] == "8000"
    assert {p["name"]: p["containerPort"] for p in api["ports"]} == {"http": 8000}
    # preStop at least the drain; the grace period at least preStop, drain and in-flight requests together.
    settings = config(docs)
    drain = float(settings["WOVEPAPER_SHUTDOWN_DRAIN_S"])
    grace = float(settings["WOVEPAPER_SHUTDOWN_GRACE_S"])
    command = api["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    pre_stop = float(command[1])
    assert pre_stop >= drain
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + drain + grace
    # Idle connections from the ingress outlive its own idle timeout (ingress-nginx's upstream keep-alive, a cloud
    # load balancer's: 60 s), so the API never closes one as the ingress sends on it.
    assert float(settings["WOVEPAPER_KEEP_ALIVE_S"]) > 60
    # A rollout keeps the old pods serving until the new ones are ready; the autoscaler owns the count.
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert "replicas" not in deployment["spec"]
    # The init container checks the database and the image's model before the API starts.
    (check,) = pod["initContainers"]
    assert check["args"][0] == "check" and "database" in check["args"]


@pytest.mark.parametrize("name", BUILDS)
def test_every_pod_runs_restricted_non_root_read_only_with_resources(name: str) -> None:
    docs = build(name)
    specs = pod_specs(docs)
    assert set(specs) == {
        "Deployment/wovepaper-api", "Job/wovepaper-migrate", "CronJob/wovepaper-ingest", "CronJob/wovepaper-embed",
    }  # fmt: skip
    for where, pod in specs.items():
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        assert pod["securityContext"]["runAsUser"] == 10001, where  # the image's user (deploy/Dockerfile)
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert pod["automountServiceAccountToken"] is False, where
        for container in pod.get("initContainers", []) + pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"], where
            assert container["resources"]["limits"]["memory"], where
            # A read-only root: Python's temporary files go to a volume.
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            volumes = {v["name"]: v for v in pod["volumes"]}
            assert "emptyDir" in volumes[mounts["/tmp"]], where
    # The API's workers write their metrics to an emptyDir; no other container is told of a metrics directory,
    # since a process that is writes there (and would fail on the read-only root).
    for where, pod in specs.items():
        volumes = {v["name"]: v for v in pod["volumes"]}
        for container in pod.get("initContainers", []) + pod["containers"]:
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            if "PROMETHEUS_MULTIPROC_DIR" in env:
                assert "emptyDir" in volumes[mounts[env["PROMETHEUS_MULTIPROC_DIR"]]], where
    (api,) = specs["Deployment/wovepaper-api"]["containers"]
    assert {"name": "PROMETHEUS_MULTIPROC_DIR", "value": METRICS_DIR} in api["env"]
    final_stage = (ROOT / "deploy" / "Dockerfile").read_text().split("\nFROM ")[-1]
    image_env = " ".join(re.findall(r"^ENV (?:.*\\\n)*.*$", final_stage, re.M))
    assert "PROMETHEUS_MULTIPROC_DIR" not in image_env and "USER 10001:10001" in final_stage
    if name == "production":
        namespace = one(docs, "Namespace")
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        assert all(d["metadata"].get("namespace") == "wovepaper" for d in docs if d["kind"] != "Namespace")


@pytest.mark.parametrize("name", BUILDS)
def test_service_autoscaler_and_budget_select_the_api_pods(name: str) -> None:
    docs = build(name)
    deployment = one(docs, "Deployment", "wovepaper-api")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = one(docs, "Service", "wovepaper-api")
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "wovepaper-api"}
    # A voluntary disruption never takes every pod the autoscaler keeps.
    assert pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]
    assert deployment["metadata"]["labels"]["app.kubernetes.io/part-of"] == "wovepaper"


@pytest.mark.parametrize("name", BUILDS)
def test_migrations_as_a_job_and_the_ingest_one_run_at_a_time(name: str) -> None:
    docs = build(name)
    job = one(docs, "Job", "wovepaper-migrate")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    crons = {d["metadata"]["name"]: d for d in docs if d["kind"] == "CronJob"}
    args = {name: cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] for name, cron in
            crons.items()}  # fmt: skip
    assert args == {"wovepaper-ingest": ["ingest", "all"], "wovepaper-embed": ["embed"]}
    for cron in crons.values():
        assert cron["spec"]["concurrencyPolicy"] == "Forbid"
        assert cron["spec"]["timeZone"] == "Etc/UTC"
        assert len(cron["spec"]["schedule"].split()) == 5
    # After arXiv's 20:00 US Eastern announcement (00:00 or 01:00 UTC), at any time of year.
    minute, hour, *_ = crons["wovepaper-ingest"]["spec"]["schedule"].split()
    assert 2 <= int(hour) <= 6
    # Every pod runs the same image.
    images = {c["image"] for pod in pod_specs(docs).values() for c in pod.get("initContainers", []) + pod["containers"]}
    assert len(images) == 1
    if name == "production":
        assert images == {"registry.example.com/wovepaper/wovepaper-api:0.1.0"}


@pytest.mark.parametrize("name", BUILDS)
def test_secrets_are_referenced_never_inlined_and_the_settings_parse(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = build(name)
    assert not [d for d in docs if d["kind"] == "Secret"]
    for where, pod in pod_specs(docs).items():
        for container in pod.get("initContainers", []) + pod["containers"]:
            refs = container["envFrom"]
            assert {"secretRef": {"name": SECRET}} in refs, where
            assert not [e for e in container.get("env", []) if "value" in e and SECRET_NAME.search(e["name"])]
    settings = config(docs)
    assert not [k for k in settings if SECRET_NAME.search(k)], "a secret in the ConfigMap"
    known = setting_names() | OTHER_VARIABLES
    assert set(settings) <= known, set(settings) - known
    for variable in [k for k in os.environ if k.startswith("WOVEPAPER_") or k in ("DATABASE_URL", "REDIS_URL")]:
        monkeypatch.delenv(variable)
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    loaded = load_settings()
    assert loaded.workers >= 1 and loaded.log_format == "json"
    example = (K8S / "secrets.env.example").read_text()
    names = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", example, re.M))
    assert {"DATABASE_URL", "REDIS_URL"} <= names and names <= known
    ignored = subprocess.run(["git", "check-ignore", "-q", "deploy/k8s/secrets.env"], cwd=ROOT)
    assert ignored.returncode == 0, "deploy/k8s/secrets.env must be git-ignored"
