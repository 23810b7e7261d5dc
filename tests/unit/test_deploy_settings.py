"""The deploy files and the server's settings agree: the Compose file, the image and
every Kubernetes overlay name only SESSIONSTORE_* variables the server reads (its
settings object's fields, found by reflection, so a new setting is known at once),
and each process is given what it needs to start where it is deployed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from services.config import Config
from services.grpc.security import check_exposure
from tests.support.manifests import (
    COMPONENTS,
    DEPLOY,
    KUBERNETES,
    OVERLAYS,
    Object,
    compose,
    containers,
    dockerfile_env,
    environment,
    find,
    pod_spec,
    render,
    render_with_component,
)

REPO = DEPLOY.parent
PREFIX = "SESSIONSTORE_"
SETTINGS = {f"{PREFIX}{name.upper()}" for name in Config.model_fields}
# What stands in for a secret's value: its shape, not its content.
SECRET_VALUES = {"uri": "postgresql://sessionstore:secret@sessionstore-db-rw:5432/sessionstore"}
PATH_SETTINGS = ("tokens_file", "tls_cert_file", "tls_key_file", "tls_client_ca_file")


def unread(names: set[str]) -> set[str]:
    return {name for name in names if name.startswith(PREFIX) and name not in SETTINGS}


def loaded(variables: dict[str, Any], tmp_path: Path) -> Config:
    """The settings a process gets from these variables, read as the server reads them
    (a variable from a secret gets a value of its shape)."""
    lines = []
    for name, value in variables.items():
        text = SECRET_VALUES[value["key"]] if isinstance(value, dict) else value
        lines.append(f"{name}='{text}'")
    dotenv = tmp_path / "settings.env"
    dotenv.write_text("\n".join(lines) + "\n")
    return Config(_env_file=dotenv)  # type: ignore[call-arg]


def all_renders() -> dict[str, list[Object]]:
    found = {o: render(KUBERNETES / "overlays" / o) for o in OVERLAYS}
    for component in COMPONENTS:
        found[f"single-node+{component}"] = render_with_component("single-node", component)
    return found


def test_a_name_the_server_does_not_read_is_caught(tmp_path: Path) -> None:
    assert unread({"SESSIONSTORE_ADDRESS", "SESSIONSTORE_NO_SUCH_SETTING"}) == {
        "SESSIONSTORE_NO_SUCH_SETTING"
    }
    with pytest.raises(ValidationError):
        loaded({"SESSIONSTORE_NO_SUCH_SETTING": "1"}, tmp_path)


def test_the_deploy_files_name_only_settings_the_server_reads() -> None:
    image = set(dockerfile_env())
    assert image & SETTINGS and not unread(image)
    service = compose()["services"]["sessionstore"]
    assert not unread(set(service["environment"]))
    for name, objects in all_renders().items():
        named = set()
        for _, container in containers(objects):
            named |= set(environment(objects, container))
        for config_map in (o for o in objects if o["kind"] == "ConfigMap"):
            named |= {key for key in config_map.get("data", {}) if key.startswith(PREFIX)}
        # Every variable a container gets is a setting of the store.
        assert named and {n for n in named if not n.startswith(PREFIX)} == set(), name
        assert not unread(named), name


def test_compose_gives_the_image_what_it_needs_to_start(tmp_path: Path) -> None:
    service = compose()["services"]["sessionstore"]
    # ${VAR:?message} stands for what the operator must give.
    given = {
        name: re.sub(r"\$\{[^}]*\}", "given", str(value))
        for name, value in service["environment"].items()
    }
    image = {k: v for k, v in dockerfile_env().items() if k.startswith(PREFIX)}
    config = loaded({**image, **given}, tmp_path)
    check_exposure(config)
    assert config.database_url.startswith("postgresql://")
    assert config.tokens_file == Path("/run/secrets") / service["secrets"][0]
    assert compose()["services"]["sessionstore"]["depends_on"]["postgres"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_process_is_given_what_it_needs_to_start(overlay: str, tmp_path: Path) -> None:
    objects = render(KUBERNETES / "overlays" / overlay)
    for _, container in containers(objects):
        config = loaded(environment(objects, container), tmp_path)
        # One PostgreSQL database for every replica, from the secret.
        assert config.database_url == SECRET_VALUES["uri"], container["name"]
    server = find(objects, "Deployment", "sessionstore")
    spec = pod_spec(server)
    (container,) = spec["containers"]
    config = loaded(environment(objects, container), tmp_path)
    # Reachable by other pods, so tokens and TLS are required (the server's own rule).
    assert not config.listens_on_loopback and config.health_address is not None
    check_exposure(config)
    assert config.tokens_file is not None and config.tls_cert_file is not None
    # Each file it is given lies in a mounted secret.
    secret_mounts = {
        mount["mountPath"]
        for mount in container["volumeMounts"]
        for volume in spec["volumes"]
        if volume["name"] == mount["name"] and "secret" in volume
    }
    for setting in PATH_SETTINGS:
        path = getattr(config, setting)
        if path is not None:
            assert str(path.parent) in secret_mounts, setting


def test_the_image_copies_what_the_lock_installs() -> None:
    """The Dockerfile copies the project's packages and the workspace members the
    lock installs with them (its second sync would fail on a missing one)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    needed = {
        *project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"],
        *project["tool"]["uv"]["workspace"]["members"],
    }
    copied = set()
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            copied.update(line.split()[1:-1])
    assert needed <= copied
