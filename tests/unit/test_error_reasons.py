"""Every refusal names a reason, sent to the client in its google.rpc.ErrorInfo."""

from __future__ import annotations

import importlib
import pkgutil

import domain
import services
from domain.errors import DomainError


def _every_refusal() -> list[type[DomainError]]:
    for package in (domain, services):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            # Alembic's environment runs only under Alembic.
            if not module.name.startswith("services.adapters.migrations"):
                importlib.import_module(module.name)
    found: list[type[DomainError]] = []
    pending = [DomainError]
    while pending:
        kind = pending.pop()
        found.append(kind)
        pending += kind.__subclasses__()
    return found[1:]


def test_every_refusal_names_a_reason_of_its_own_or_its_groups() -> None:
    kinds = _every_refusal()
    assert len(kinds) > 30
    assert [k.__name__ for k in kinds if not k.reason] == []
    # A reason names one kind of refusal: a subclass names its own or shares its parent's.
    owners: dict[str, list[str]] = {}
    for kind in kinds:
        if "reason" in vars(kind):
            owners.setdefault(kind.reason, []).append(kind.__name__)
    assert {r: o for r, o in owners.items() if len(o) > 1} == {}
