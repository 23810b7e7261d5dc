"""The Kubernetes manifests, rendered offline and validated object by object.

Core kinds are checked against Kubernetes' own schemas (kubernetes-validate,
strict: an unknown field fails) for the oldest version the README promises and
the newest one known; the custom resources (CloudNativePG's Cluster, the
Prometheus Operator's ServiceMonitor) against schemas of the fields used here,
which refuse any other. Then what no schema knows: names that must match
across objects, and timings that must fit the server's own.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from kubernetes_validate.utils import latest_version

from services.grpc.server import GRACE_SECONDS, STOP_MARGIN_SECONDS
from tests.support.manifests import (
    COMPONENTS,
    KUBERNETES,
    OVERLAYS,
    Object,
    containers,
    environment,
    find,
    pod_spec,
    render,
    render_with_component,
)

# The oldest Kubernetes the manifests are for (README, "Deploy").
OLDEST = "1.30"
SECRETS = {"sessionstore-tokens", "sessionstore-tls", "sessionstore-db-app"}


def _closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object schema that refuses fields it does not name."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
QUANTITY = {"type": "string", "pattern": r"^[0-9.]+(m|Ki|Mi|Gi|Ti)?$"}
METADATA = {
    "type": "object",
    "properties": {"name": NAME, "namespace": NAME, "labels": STRINGS, "annotations": STRINGS},
    "required": ["name"],
}


def _kind(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _closed(
        {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": METADATA,
            "spec": spec,
        },
        ("apiVersion", "kind", "metadata", "spec"),
    )


CUSTOM_KINDS = {
    ("postgresql.cnpg.io/v1", "Cluster"): _kind(
        "postgresql.cnpg.io/v1",
        "Cluster",
        _closed(
            {
                "instances": {"type": "integer", "minimum": 1},
                "imageName": {"type": "string"},
                "primaryUpdateStrategy": {"enum": ["unsupervised", "supervised"]},
                "bootstrap": _closed(
                    {
                        "initdb": _closed(
                            {
                                "database": {"type": "string"},
                                "owner": {"type": "string"},
                                "secret": _closed({"name": NAME}, ("name",)),
                            }
                        )
                    }
                ),
                "postgresql": _closed({"parameters": STRINGS}),
                "storage": _closed(
                    {"size": QUANTITY, "storageClass": {"type": "string"}}, ("size",)
                ),
                "resources": _closed(
                    {
                        "requests": {"type": "object", "additionalProperties": QUANTITY},
                        "limits": {"type": "object", "additionalProperties": QUANTITY},
                    }
                ),
                "affinity": _closed(
                    {
                        "enablePodAntiAffinity": {"type": "boolean"},
                        "topologyKey": {"type": "string"},
                    }
                ),
            },
            ("instances", "storage"),
        ),
    ),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _kind(
        "monitoring.coreos.com/v1",
        "ServiceMonitor",
        _closed(
            {
                "selector": _closed({"matchLabels": STRINGS}, ("matchLabels",)),
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": _closed(
                        {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "interval": {"type": "string", "pattern": r"^[0-9]+(ms|s|m|h)$"},
                        },
                        ("port",),
                    ),
                },
            },
            ("selector", "endpoints"),
        ),
    ),
    ("monitoring.coreos.com/v1", "PodMonitor"): _kind(
        "monitoring.coreos.com/v1",
        "PodMonitor",
        _closed(
            {
                "selector": _closed({"matchLabels": STRINGS}, ("matchLabels",)),
                "podMetricsEndpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": _closed(
                        {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "interval": {"type": "string", "pattern": r"^[0-9]+(ms|s|m|h)$"},
                        },
                        ("port",),
                    ),
                },
            },
            ("selector", "podMetricsEndpoints"),
        ),
    ),
}


def validate(found: Object) -> None:
    """Raises when ``found`` is not a valid object of its kind."""
    schema = CUSTOM_KINDS.get((found["apiVersion"], found["kind"]))
    if schema is not None:
        jsonschema.validate(found, schema)
        return
    for version in (OLDEST, latest_version()):
        # An unknown kind raises too: every kind here must be known.
        kubernetes_validate.validate(found, version, strict=True)


RENDERS = {
    **{
        overlay: lambda overlay=overlay: render(KUBERNETES / "overlays" / overlay)
        for overlay in OVERLAYS
    },
    **{
        f"single-node+{component}": lambda component=component: render_with_component(
            "single-node", component
        )
        for component in COMPONENTS
    },
}


@pytest.fixture(scope="module", params=sorted(RENDERS))
def objects(request: pytest.FixtureRequest) -> list[Object]:
    return RENDERS[request.param]()


def test_every_object_is_valid_for_its_kind(objects: list[Object]) -> None:
    for found in objects:
        validate(found)


def test_the_validation_refuses_what_a_typo_makes() -> None:
    objects = render(KUBERNETES / "overlays" / "production")
    server = copy.deepcopy(find(objects, "Deployment", "sessionstore"))
    pod_spec(server)["containers"][0]["readinessProbe"]["grcp"] = {"port": 8081}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(server)
    database = copy.deepcopy(find(objects, "Cluster", "sessionstore-db"))
    database["spec"]["instance"] = 3
    with pytest.raises(jsonschema.ValidationError):
        validate(database)


def test_no_secret_is_inlined_and_every_one_referenced_is_documented(
    objects: list[Object],
) -> None:
    assert not [o for o in objects if o["kind"] == "Secret"]
    referenced = set()
    for workload in objects:
        if workload["kind"] in ("Deployment", "Job"):
            for volume in pod_spec(workload).get("volumes", []):
                if "secret" in volume:
                    referenced.add(volume["secret"]["secretName"])
    for _, container in containers(objects):
        for value in environment(objects, container).values():
            if isinstance(value, dict):
                referenced.add(value["name"])
    assert referenced == SECRETS


def test_services_policies_and_budgets_select_pods_that_exist(objects: list[Object]) -> None:
    pods = [
        pod_spec(o) | {"labels": o["spec"]["template"]["metadata"]["labels"]}
        for o in objects
        if o["kind"] == "Deployment"
    ]

    def selected(match: dict[str, str]) -> list[Object]:
        return [p for p in pods if match.items() <= p["labels"].items()]

    for found in objects:
        kind, spec = found["kind"], found.get("spec", {})
        if kind == "Service":
            (server,) = selected(spec["selector"])
            names = {p["name"] for c in server["containers"] for p in c.get("ports", [])}
            assert {p["targetPort"] for p in spec["ports"]} <= names
        elif kind in ("PodDisruptionBudget", "ServiceMonitor"):
            assert selected(spec["selector"]["matchLabels"])
        elif kind == "NetworkPolicy":
            assert selected(spec["podSelector"]["matchLabels"])
        elif kind == "HorizontalPodAutoscaler":
            target = find(objects, "Deployment", spec["scaleTargetRef"]["name"])
            assert pod_spec(target)["containers"][0]["resources"]["requests"]["cpu"]
    monitors = [o for o in objects if o["kind"] == "ServiceMonitor"]
    for monitor in monitors:
        service = find(objects, "Service", "sessionstore")
        ports = {p["name"] for p in service["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports


def test_probes_and_the_stop_fit_the_server(objects: list[Object]) -> None:
    server = find(objects, "Deployment", "sessionstore")
    spec = pod_spec(server)
    (container,) = spec["containers"]
    env = environment(objects, container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert int(env["SESSIONSTORE_ADDRESS"].rpartition(":")[2]) == ports["grpc"]
    health = int(env["SESSIONSTORE_HEALTH_ADDRESS"].rpartition(":")[2])
    assert health == ports["health"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == health
    # Readiness follows the database; liveness only the process.
    assert container["readinessProbe"]["grpc"].get("service", "") == ""
    assert container["livenessProbe"]["grpc"]["service"] == "liveness"
    # The pod's grace covers the preStop pause, the server's grace and its exit.
    sleep_command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep_command[0] == "sleep"
    needed = int(sleep_command[1]) + GRACE_SECONDS + STOP_MARGIN_SECONDS
    assert spec["terminationGracePeriodSeconds"] > needed


def test_the_migration_runs_once_and_everything_else_waits_for_it(
    objects: list[Object],
) -> None:
    job = find(objects, "Job", "sessionstore-migrate")
    (migrate,) = pod_spec(job)["containers"]
    assert migrate["command"] == ["sessionstore", "migrate"]
    for name in ("sessionstore", "sessionstore-worker"):
        spec = pod_spec(find(objects, "Deployment", name))
        (wait,) = spec["initContainers"]
        assert wait["command"][:4] == ["sessionstore", "migrate", "--check", "--wait"]
        (main,) = spec["containers"]
        assert environment(objects, main)["SESSIONSTORE_MIGRATE_AT_START"] == "false"
        # All on the same database.
        assert (
            environment(objects, wait)["SESSIONSTORE_DATABASE_URL"]
            == environment(objects, migrate)["SESSIONSTORE_DATABASE_URL"]
        )


def test_the_servers_leave_the_read_models_to_the_worker(objects: list[Object]) -> None:
    server = find(objects, "Deployment", "sessionstore")
    assert (
        environment(objects, pod_spec(server)["containers"][0])["SESSIONSTORE_PROJECTIONS"]
        == "worker"
    )
    worker = find(objects, "Deployment", "sessionstore-worker")
    assert pod_spec(worker)["containers"][0]["command"] == ["sessionstore-worker"]


def test_production_runs_on_cloudnativepg_with_a_standby_worker() -> None:
    objects = render(KUBERNETES / "overlays" / "production")
    database = find(objects, "Cluster", "sessionstore-db")
    # CloudNativePG names the application's secret after the cluster.
    urls = [environment(objects, c)["SESSIONSTORE_DATABASE_URL"] for _, c in containers(objects)]
    assert urls == [{"name": f"{database['metadata']['name']}-app", "key": "uri"}] * len(urls)
    assert find(objects, "Deployment", "sessionstore-worker")["spec"]["replicas"] == 2
    assert find(objects, "HorizontalPodAutoscaler", "sessionstore")["spec"]["minReplicas"] >= 2


def test_a_single_node_runs_one_of_each_without_an_autoscaler() -> None:
    objects = render(KUBERNETES / "overlays" / "single-node")
    assert not [o for o in objects if o["kind"] in ("HorizontalPodAutoscaler", "Cluster")]
    for name in ("sessionstore", "sessionstore-worker"):
        assert find(objects, "Deployment", name)["spec"]["replicas"] == 1


def test_the_readme_shows_the_clients_service_config() -> None:
    objects = render(KUBERNETES / "overlays" / "production")
    shown = find(objects, "ConfigMap", "sessionstore-client")["data"]["service-config.json"]
    assert json.loads(shown) == {"loadBalancingConfig": [{"round_robin": {}}]}
    readme = (KUBERNETES.parents[1] / "README.md").read_text()
    deploy = readme[readme.index("## Deploy") : readme.index("## Architecture")]
    assert f"'{json.dumps(json.loads(shown))}'" in deploy


def test_prometheus_finds_the_metrics_port_of_every_server_and_worker() -> None:
    objects = render(KUBERNETES / "overlays" / "production")
    service = find(objects, "Service", "sessionstore")
    monitor = find(objects, "ServiceMonitor", "sessionstore")
    selected = monitor["spec"]["selector"]["matchLabels"].items()
    assert selected <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    pod_monitor = find(objects, "PodMonitor", "sessionstore-worker")
    for name, monitor_port in (
        ("sessionstore", endpoint["port"]),
        ("sessionstore-worker", pod_monitor["spec"]["podMetricsEndpoints"][0]["port"]),
    ):
        workload = find(objects, "Deployment", name)
        if name == "sessionstore-worker":
            selector = pod_monitor["spec"]["selector"]["matchLabels"].items()
            assert selector <= workload["spec"]["template"]["metadata"]["labels"].items()
        (container,) = pod_spec(workload)["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        # The process listens where the port the monitor scrapes points.
        address = environment(objects, container)["SESSIONSTORE_METRICS_ADDRESS"]
        assert address == f"0.0.0.0:{ports[monitor_port]}", name
    # And the network policies let the scrapes in.
    allowed = {
        policy["metadata"]["name"]: {
            port["port"] for rule in policy["spec"].get("ingress", []) for port in rule["ports"]
        }
        for policy in objects
        if policy["kind"] == "NetworkPolicy"
    }
    assert 9464 in allowed["sessionstore-server"] and 9464 in allowed["sessionstore-worker"]
