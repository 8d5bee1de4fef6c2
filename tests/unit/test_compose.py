"""Static checks of compose.yaml, Dockerfile and .dockerignore (no Docker engine needed)."""

from __future__ import annotations

import importlib.util
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from control.cli import COMMANDS, build_parser
from shared.settings import ENV_DEFAULTS, OTEL_VARS

ROOT = Path(__file__).resolve().parents[2]

# Subcommands of the real `trawl` CLI.
build_parser()  # imports every CLI module, which registers its commands
CLI_COMMANDS = tuple(COMMANDS)

REQUIRED = {"nats", "postgres", "jaeger", "migrate", "scheduler", "fetcher", "parser", "api"}
REQUIRED |= {"refresher", "renderer", "notifier", "demo-shop"}
SCALABLE = (
    "scheduler",
    "fetcher",
    "renderer",
    "parser",
    "refresher",
    "notifier",
    "api",
    "demo-shop",
)
WORKERS = ("scheduler", "fetcher", "renderer", "parser", "refresher", "notifier", "api")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())  # resolves anchors and <<


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def trawl_services(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Services running the trawl image (built from this repo)."""
    return {
        name: svc
        for name, svc in services.items()
        if "build" in svc or str(svc.get("image", "")).startswith("trawl")
    }


def command(svc: dict[str, Any]) -> list[str]:
    cmd = svc.get("command", [])
    return shlex.split(cmd) if isinstance(cmd, str) else [str(part) for part in cmd]


def environment(svc: dict[str, Any]) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def host_part(port: Any) -> str | None:
    """The host side of a ``ports`` entry, or None when only the container port is given."""
    if isinstance(port, dict):  # long syntax
        published = port.get("published")
        return None if published in (None, "") else str(published)
    spec = str(port).split("/", 1)[0]  # drop /tcp, /udp
    if spec.startswith("["):  # [::1]:8686:8686
        spec = spec.rsplit("]", 1)[1].lstrip(":")
    parts = spec.split(":")
    return None if len(parts) == 1 else ":".join(parts[:-1])


def depends(svc: dict[str, Any]) -> dict[str, str]:
    deps = svc.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: (cond or {}).get("condition", "service_started") for name, cond in deps.items()}


# -- compose.yaml ------------------------------------------------------------------------------


def test_required_services_exist(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) >= REQUIRED, f"missing: {sorted(REQUIRED - set(services))}"


def test_no_container_names(services: dict[str, dict[str, Any]]) -> None:
    named = [name for name, svc in services.items() if "container_name" in svc]
    assert not named, f"container_name blocks --scale: {named}"


def test_scalable_services_publish_no_fixed_host_port(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in SCALABLE:
        fixed = [p for p in services[name].get("ports", []) if host_part(p) is not None]
        assert not fixed, f"{name}: fixed host ports {fixed} break --scale {name}=2"


def test_host_part_parsing() -> None:
    assert host_part("8686") is None
    assert host_part(8686) is None
    assert host_part("8686/tcp") is None
    assert host_part("8686:8686") == "8686"
    assert host_part("127.0.0.1:8686:8686") == "127.0.0.1:8686"
    assert host_part("8000-8010:8686") == "8000-8010"
    assert host_part({"target": 8686}) is None
    assert host_part({"target": 8686, "published": 8686}) == "8686"


def test_api_serves_on_all_interfaces(services: dict[str, dict[str, Any]]) -> None:
    api = services["api"]
    assert environment(api)["TRAWL_API_LISTEN"] == "0.0.0.0:8686"
    assert [str(p) for p in api["ports"]] == ["8686"]
    health = " ".join(command({"command": api["healthcheck"]["test"]}))
    assert "8686/healthz" in health


@pytest.mark.parametrize(
    ("service", "module"),
    [
        ("scheduler", "services.scheduler"),
        ("fetcher", "services.fetcher"),
        ("renderer", "services.fetcher.render"),
        ("parser", "services.parser"),
        ("refresher", "services.refresher"),
        ("notifier", "services.notifier"),
        ("api", "control.api"),
        ("demo-shop", "demo"),
    ],
)
def test_service_commands(services: dict[str, dict[str, Any]], service: str, module: str) -> None:
    assert command(services[service])[:3] == ["python", "-m", module]


def test_python_modules_exist(services: dict[str, dict[str, Any]]) -> None:
    modules = [cmd[2] for cmd in map(command, services.values()) if cmd[:2] == ["python", "-m"]]
    assert modules
    for module in modules:
        assert importlib.util.find_spec(module) is not None, f"python -m {module}: no such module"


def test_python_packages_are_runnable(services: dict[str, dict[str, Any]]) -> None:
    """``python -m pkg`` needs ``pkg/__main__.py``."""
    missing = []
    for cmd in map(command, services.values()):
        if cmd[:2] != ["python", "-m"]:
            continue
        spec = importlib.util.find_spec(cmd[2])
        is_package = spec is not None and spec.submodule_search_locations is not None
        if is_package and importlib.util.find_spec(f"{cmd[2]}.__main__") is None:
            missing.append(f"{cmd[2]}.__main__")
    assert not missing, f"python -m needs these entry points: {', '.join(missing)}"


def test_trawl_commands_are_cli_subcommands(services: dict[str, dict[str, Any]]) -> None:
    used = [cmd for cmd in map(command, services.values()) if cmd[:1] == ["trawl"]]
    assert used, "expected at least `trawl migrate`"
    for cmd in used:
        assert len(cmd) > 1 and cmd[1] in CLI_COMMANDS, f"unknown CLI command: {cmd}"


def test_trawl_services_only_set_known_variables(services: dict[str, dict[str, Any]]) -> None:
    known = set(ENV_DEFAULTS) | set(OTEL_VARS)
    ours = trawl_services(services)
    assert set(WORKERS) | {"migrate"} <= set(ours)
    for name, svc in ours.items():
        unknown = set(environment(svc)) - known
        assert not unknown, f"{name} sets variables trawl never reads: {sorted(unknown)}"


def test_trawl_services_share_the_connection_settings(
    services: dict[str, dict[str, Any]],
) -> None:
    names = set()
    for name in (*WORKERS, "migrate"):
        env = environment(services[name])
        assert env["NATS_URL"] == "nats://nats:4222", name
        assert env["DATABASE_URL"] == "postgresql://root@postgres:5432/trawl", name
        assert env["TRAWL_NAMESPACE"] == "trawl", name
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318", name
        assert env["TRAWL_API_TOKEN"] == "${TRAWL_API_TOKEN:-}", name
        names.add(env["OTEL_SERVICE_NAME"])
    assert len(names) == len(WORKERS) + 1, "each service needs its own OTEL_SERVICE_NAME"


def test_start_order(services: dict[str, dict[str, Any]]) -> None:
    assert command(services["migrate"]) == ["trawl", "migrate"]
    assert depends(services["migrate"])["postgres"] == "service_healthy"
    assert services["migrate"].get("restart", "no") == "no"
    for name in WORKERS:
        deps = depends(services[name])
        assert deps.get("migrate") == "service_completed_successfully", name
        assert deps.get("nats") == "service_healthy", name


def test_health_conditions_have_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        for dep, condition in depends(svc).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep}'s health"


def test_infrastructure(services: dict[str, dict[str, Any]]) -> None:
    nats = services["nats"]
    assert nats["image"].startswith("nats:2.10")
    assert command(nats)[:3] == ["-js", "-sd", "/data"]
    assert "js-enabled-only=true" in " ".join(command({"command": nats["healthcheck"]["test"]}))
    postgres = services["postgres"]
    assert postgres["environment"]["POSTGRES_HOST_AUTH_METHOD"] == "trust"
    assert postgres["environment"]["POSTGRES_USER"] == "root"
    assert "pg_isready" in " ".join(command({"command": postgres["healthcheck"]["test"]}))
    jaeger = services["jaeger"]
    assert str(jaeger["environment"]["COLLECTOR_OTLP_ENABLED"]).lower() == "true"
    assert "16686:16686" in [str(p) for p in jaeger["ports"]]


def test_volumes_are_declared(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    used = set()
    for svc in compose["services"].values():
        for volume in svc.get("volumes", []):
            source = volume.get("source", "") if isinstance(volume, dict) else volume.split(":")[0]
            if source and not source.startswith((".", "/", "~")):  # named, not a bind mount
                used.add(source)
    assert used, "nats and postgres keep their data on named volumes"
    assert used <= declared, f"undeclared volumes: {sorted(used - declared)}"
    assert any("/data" in str(v) for v in compose["services"]["nats"]["volumes"])
    assert any("postgresql" in str(v) for v in compose["services"]["postgres"]["volumes"])


# -- Dockerfile and .dockerignore --------------------------------------------------------------


def instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            rows.append((keyword.upper(), rest.strip()))
    return rows


def test_dockerfile_installs_the_project() -> None:
    rows = instructions()
    assert rows[0] == ("FROM", "python:3.11-slim")
    runs = " ".join(rest for keyword, rest in rows if keyword == "RUN")
    assert "pip install" in runs
    assert "pip install --no-deps ." in runs or "pip install ." in runs
    assert any(keyword == "COPY" and rest.startswith(". ") for keyword, rest in rows)


def test_dockerfile_runs_as_non_root_with_a_sane_command() -> None:
    rows = instructions()
    users = [rest for keyword, rest in rows if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert not [rest for keyword, rest in rows if keyword == "ENTRYPOINT"]  # compose commands
    cmds = [rest for keyword, rest in rows if keyword == "CMD"]
    assert cmds and json.loads(cmds[-1]) == ["trawl", "--help"]


def test_the_renderer_image_brings_its_browser(services: dict[str, dict[str, Any]]) -> None:
    build = services["renderer"]["build"]
    dockerfile = (ROOT / build["dockerfile"]).read_text()
    assert "apt-get install" in dockerfile and " chromium" in dockerfile  # Debian's browser
    assert "['render']" in dockerfile  # the render extra: Playwright
    assert "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1" in dockerfile


def test_dockerignore_keeps_what_the_build_needs() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv"} <= ignored
    assert not ignored & {"pyproject.toml", "README.md", "shared", "services", "migrations"}
