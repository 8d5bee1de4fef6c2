"""Static checks of deploy/ (no cluster needed): both kustomize overlays build; every object
validates against the Kubernetes API schema of a current version (kubernetes-validate); the
KEDA ScaledObjects validate against KEDA's CRD schema (checked in with its source and version)
and use only metadata the nats-jetstream scaler reads; every variable set in the manifests is
one trawl reads (shared/settings.py) and every command exists; workers have probes, a grace
period covering the drain, requests and limits, and no replica count where KEDA decides."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from control.cli import COMMANDS, build_parser
from shared.settings import ENV_DEFAULTS, OTEL_VARS

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = ("dev", "prod")
K8S_VERSION = "1.33"  # a current release that kubernetes-validate carries schemas for
KEDA_CRD = DEPLOY / "schemas" / "keda.sh_scaledobjects.yaml"
# The metadata keys KEDA 2.20's nats-jetstream scaler reads (pkg/scalers/nats_jetstream_scaler.go,
# the `keda:"name=..."` tags of its metadata struct).
NATS_JETSTREAM_METADATA = {
    "account",
    "accountID",
    "stream",
    "consumer",
    "lagThreshold",
    "activationLagThreshold",
    "useHttps",
    "natsServerMonitoringEndpoint",
}
SCALED = {
    "trawl-fetcher": "fetcher",
    "trawl-renderer": "renderer",
    "trawl-parser": "parser",
    "trawl-refresher": "refresher",
    "trawl-notifier": "notifier",
}
# serve() waits 30 s for in-flight work, then 10 s for the NATS drain.
DRAIN_SECONDS = 40

build_parser()  # registers every CLI command
KUBECTL = shutil.which("kubectl")


@cache
def build(overlay: str) -> list[dict[str, Any]]:
    if KUBECTL is None:
        pytest.skip("kubectl (with kustomize) is not installed")
    out = subprocess.run(
        [KUBECTL, "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def base_objects() -> list[dict[str, Any]]:
    """The base's files as written (checked even without kubectl)."""
    kustomization = yaml.safe_load((DEPLOY / "base" / "kustomization.yaml").read_text())
    objects = []
    for name in kustomization["resources"]:
        objects += [d for d in yaml.safe_load_all((DEPLOY / "base" / name).read_text()) if d]
    return objects


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (o["metadata"]["name"], o["spec"]["template"]["spec"])
        for o in objects
        if o["kind"] in ("Deployment", "Job")
    ]


def containers(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, c)
        for name, spec in pod_specs(objects)
        for c in spec.get("initContainers", []) + spec["containers"]
    ]


@pytest.fixture(params=OVERLAYS)
def objects(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return build(request.param)


def test_base_resources_are_listed() -> None:
    listed = set(yaml.safe_load((DEPLOY / "base" / "kustomization.yaml").read_text())["resources"])
    on_disk = {p.name for p in (DEPLOY / "base").glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk


@pytest.mark.parametrize("source", ["base", *OVERLAYS])
def test_kubernetes_objects_validate(source: str) -> None:
    objs = base_objects() if source == "base" else build(source)
    errors = []
    for obj in objs:
        if obj["apiVersion"].startswith("keda.sh/"):
            continue  # a CRD: checked against KEDA's schema below
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    assert not errors, errors


@cache
def keda_schema() -> dict[str, Any]:
    crd = yaml.safe_load(KEDA_CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return version["schema"]["openAPIV3Schema"]


def test_keda_objects_validate(objects: list[dict[str, Any]]) -> None:
    scaled = [o for o in objects if o["kind"] == "ScaledObject"]
    assert {o["metadata"]["name"] for o in scaled} == set(SCALED)
    for obj in scaled:
        assert obj["apiVersion"] == "keda.sh/v1alpha1"
        jsonschema.validate(obj, keda_schema())
        spec = obj["spec"]
        # Renderers scale from zero: most crawls render nothing, and a browser is heavy.
        least = 0 if obj["metadata"]["name"] == "trawl-renderer" else 1
        assert least <= spec["minReplicaCount"] < spec["maxReplicaCount"], obj["metadata"]["name"]
        assert spec["cooldownPeriod"] > 0
        for trigger in spec["triggers"]:
            assert trigger["type"] == "nats-jetstream"
            meta = trigger["metadata"]
            assert set(meta) <= NATS_JETSTREAM_METADATA, set(meta) - NATS_JETSTREAM_METADATA
            assert int(meta["lagThreshold"]) > 0


def test_keda_schema_rejects_a_broken_object() -> None:
    """The checked-in schema is really applied: a typo'd field fails."""
    obj = next(o for o in base_objects() if o["kind"] == "ScaledObject")
    broken = {**obj, "spec": {**obj["spec"], "minReplicaCount": "one"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, keda_schema())


def test_scaled_objects_name_trawl_streams(objects: list[dict[str, Any]]) -> None:
    """The stream and consumer each trigger watches are the ones trawl provisions."""
    from shared.channels import (
        FETCH_RESULTS,
        FETCH_WORK,
        PARSE_RESULTS,
        PRODUCT_CHANGES,
        RENDER_WORK,
    )
    from shared.names import Names

    config = next(o for o in objects if o["kind"] == "ConfigMap")
    names = Names(config["data"]["TRAWL_NAMESPACE"])
    channel = {
        "fetcher": FETCH_WORK,
        "renderer": RENDER_WORK,
        "parser": FETCH_RESULTS,
        "refresher": PARSE_RESULTS,
        "notifier": PRODUCT_CHANGES,
    }
    for obj in (o for o in objects if o["kind"] == "ScaledObject"):
        service = SCALED[obj["metadata"]["name"]]
        meta = obj["spec"]["triggers"][0]["metadata"]
        assert meta["stream"] == names.stream(channel[service].stream)
        assert meta["consumer"] == names.consumer(service, channel[service].stream)
        assert obj["spec"]["scaleTargetRef"]["name"] == obj["metadata"]["name"]


def test_autoscaled_deployments_have_no_replica_count(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] in SCALED:
            assert "replicas" not in obj["spec"], obj["metadata"]["name"]


def _named(objects: list[dict[str, Any]], key: tuple[str, str]) -> list[dict[str, Any]]:
    return [o for o in objects if (o["kind"], o["metadata"]["name"]) == key]


def test_every_variable_is_a_setting(objects: list[dict[str, Any]]) -> None:
    known = set(ENV_DEFAULTS) | set(OTEL_VARS)
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    used = set(config["data"])
    for _, c in containers(objects):
        used |= {e["name"] for e in c.get("env", [])}
        for source in c.get("envFrom", []):
            kind = "Secret" if "secretRef" in source else "ConfigMap"
            key = (kind, (source.get("secretRef") or source["configMapRef"])["name"])
            # prod makes its Secrets out of band: their keys are the base's placeholders'.
            (obj,) = _named(objects, key) or _named(base_objects(), key)
            used |= set(obj.get("data") or obj.get("stringData") or {})
    assert used - known == set(), "not read by trawl: " + ", ".join(sorted(used - known))


def test_every_secret_and_config_reference_resolves() -> None:
    objects = base_objects()
    keys = {
        (o["kind"], o["metadata"]["name"]): set(o.get("data") or o.get("stringData") or {})
        for o in objects
        if o["kind"] in ("Secret", "ConfigMap")
    }
    for name, c in containers(objects):
        for e in c.get("env", []):
            ref = (e.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                assert ref["key"] in keys[("Secret", ref["name"])], (name, e)


def test_every_command_exists(objects: list[dict[str, Any]]) -> None:
    for name, c in containers(objects):
        cmd = c["command"]
        if cmd[:2] == ["python", "-m"]:
            spec = importlib.util.find_spec(cmd[2])
            assert spec is not None, f"{name}: python -m {cmd[2]}: no such module"
            if spec.submodule_search_locations is not None:  # a package needs __main__
                assert importlib.util.find_spec(f"{cmd[2]}.__main__"), (name, cmd)
        else:
            assert cmd[0] == "trawl", (name, cmd)
            assert cmd[1] in COMMANDS, f"{name}: trawl {cmd[1]}: no such command"


def test_workers_are_probed_sized_and_drained(objects: list[dict[str, Any]]) -> None:
    for name, spec in pod_specs(objects):
        if not name.startswith("trawl-"):
            continue  # the dev overlay's demo shop drains nothing
        assert spec.get("terminationGracePeriodSeconds", 30) >= DRAIN_SECONDS, name
        for c in spec["containers"]:
            assert c.get("livenessProbe") and c.get("readinessProbe"), (name, c["name"])
        for c in spec.get("initContainers", []) + spec["containers"]:
            resources = c["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), (name, c["name"])
            assert "memory" in resources["limits"], (name, c["name"])


def test_every_service_has_a_disruption_budget(objects: list[dict[str, Any]]) -> None:
    budgets = {o["metadata"]["name"] for o in objects if o["kind"] == "PodDisruptionBudget"}
    trawl = {
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("trawl-")
    }
    assert trawl == budgets


def test_migrations_use_a_direct_connection(objects: list[dict[str, Any]]) -> None:
    """The migration runner's advisory lock needs a session: not the transaction pooler."""
    for name, c in containers(objects):
        if c["command"][:2] == ["trawl", "migrate"]:
            (url,) = [e for e in c["env"] if e["name"] == "DATABASE_URL"]
            assert url["valueFrom"]["secretKeyRef"]["key"] == "direct-url", name
