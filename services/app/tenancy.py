"""Who is calling, and which sessions that caller may see.

The transport (the gRPC server's authentication layer) authenticates a call and sets the
caller here for the time of the call; the use cases read it. Work the server
does on its own (the context engine's background compactions, the read
models) runs without a caller set and sees every tenant, as does a server
without authentication, whose every caller is the admin of DEFAULT_TENANT.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field

from domain.errors import DomainError
from domain.streams import (
    DEFAULT_TENANT,
    TENANT_SCOPE,
    stream_id,
    validate_session_id,
    validate_stream_id,
)


class Role(enum.Enum):
    TENANT = "tenant"  # reads and writes the sessions of its tenant
    AUDITOR = "auditor"  # reads the sessions of its tenant, writes nothing
    ADMIN = "admin"  # reads and writes the sessions of every tenant


class Permission(enum.Enum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


GRANTS: dict[Role, frozenset[Permission]] = {
    Role.TENANT: frozenset({Permission.READ, Permission.WRITE}),
    Role.AUDITOR: frozenset({Permission.READ}),
    Role.ADMIN: frozenset(Permission),
}


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: a token's name, its tenant and its role."""

    name: str
    tenant: str
    role: Role

    @property
    def sees_all_tenants(self) -> bool:
        return self.role is Role.ADMIN

    def may(self, permission: Permission) -> bool:
        return permission in GRANTS[self.role]

    def sees(self, tenant: str) -> bool:
        return self.sees_all_tenants or tenant == self.tenant


# The caller when nobody authenticated one: the server itself, or a server
# without authentication (which serves loopback only).
UNRESTRICTED = Principal("unauthenticated", DEFAULT_TENANT, Role.ADMIN)

_caller: ContextVar[Principal | None] = ContextVar("sessionstore_caller", default=None)


def accountable(claimed: str) -> str:
    """Who is recorded as doing something: the authenticated caller, with the
    name the client gave when it differs (an operator acting through a service
    token); without authentication only the client's word exists."""
    principal = _caller.get()
    if principal is None or principal is UNRESTRICTED:
        return claimed
    if not claimed or claimed == principal.name:
        return principal.name
    return f"{principal.name} (for {claimed})"


def caller() -> Principal:
    return _caller.get() or UNRESTRICTED


def tenant_filter() -> str | None:
    """The tenant listings are limited to: the caller's, or None for every tenant."""
    principal = caller()
    return None if principal.sees_all_tenants else principal.tenant


@contextlib.contextmanager
def calling_as(principal: Principal) -> Iterator[None]:
    """Runs the block as ``principal``. Restores the earlier caller rather than
    resetting a token: a streaming handler's generator may be finished from
    another context than the one it started in. A refusal that names one of
    the caller's sessions by its stream names it by the id the caller sends."""
    earlier = _caller.get()
    _caller.set(principal)
    try:
        yield
    except DomainError as refusal:
        if refusal.stream is None:
            raise
        raise refusal.naming(_own_name(refusal.stream, principal)) from None
    finally:
        _caller.set(earlier)


def _own_name(stream: str, principal: Principal) -> str:
    """The stream's session as the principal names it (SessionIds.client, for a
    stream whose tenant is written in it)."""
    tenant, scoped, own = stream.rpartition(TENANT_SCOPE)
    return own if scoped and tenant == principal.tenant else stream


@dataclass(frozen=True)
class SessionIds:
    """Session ids as callers name them, and the event streams that hold them.

    Ids are scoped by tenant (domain.session.stream_id): a tenant's ``abc`` and
    another's are two sessions, and one tenant probing another's ids finds them
    free. An admin names another tenant's session as ``tenant/id`` and is shown
    other tenants' sessions so. ``legacy``: the bare stream ids other tenants'
    sessions had before ids were scoped (services.adapters.legacy_tenants).
    """

    legacy: Mapping[str, str] = field(default_factory=dict)

    def stream(self, session_id: str) -> str:
        """The stream of the caller's session ``session_id``; refuses an invalid id."""
        principal = caller()
        if TENANT_SCOPE in session_id and principal.sees_all_tenants:
            validate_stream_id(session_id)
            tenant, _, own = session_id.rpartition(TENANT_SCOPE)
            return self.in_tenant(tenant, own)
        validate_session_id(session_id)
        return self.in_tenant(principal.tenant, session_id)

    def in_tenant(self, tenant: str, session_id: str) -> str:
        """The stream of the tenant's session ``session_id`` (a valid id)."""
        if self.legacy.get(session_id) == tenant:
            return session_id
        if tenant == DEFAULT_TENANT and session_id in self.legacy:
            # The bare id is another tenant's stream from before ids were scoped.
            return f"{tenant}{TENANT_SCOPE}{session_id}"
        return stream_id(tenant, session_id)

    def tenant_and_id(self, stream: str) -> tuple[str, str]:
        """The tenant whose session the stream holds, and the session's own id."""
        tenant, scoped, own = stream.rpartition(TENANT_SCOPE)
        return (tenant if scoped else self.legacy.get(stream, DEFAULT_TENANT)), own

    def client(self, stream: str) -> str:
        """How the caller names the session of this stream."""
        tenant, own = self.tenant_and_id(stream)
        return own if tenant == caller().tenant else f"{tenant}{TENANT_SCOPE}{own}"
