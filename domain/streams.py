"""Session ids, tenants and the event streams that hold them.

A tenant's session lives in a stream of its own: the session id itself in the
default tenant (so ids stored before tenants keep their meaning), ``tenant/id``
in any other, so that tenants never share, or learn of each other's, ids.
"""

from __future__ import annotations

import re

from domain.errors import InvalidRequest, quoted

SESSION_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
TENANT = re.compile(r"[A-Za-z0-9._:@-]{1,64}")
# Between a tenant and a session id in a stream id: no session id holds one.
TENANT_SCOPE = "/"
# The tenant of sessions made without authentication, and of those stored before tenants.
DEFAULT_TENANT = "default"


def validate_session_id(session_id: str) -> None:
    if not SESSION_ID.fullmatch(session_id):
        raise InvalidRequest(
            f"session id {quoted(session_id)} must be 1-128 characters of letters, digits "
            "and . _ : @ -"
        )


def stream_id(tenant: str, session_id: str) -> str:
    """The id of the event stream that holds a tenant's session: the session id in the
    default tenant (so ids stored before tenants keep their meaning), ``tenant/id`` in
    any other, so that tenants never share, or learn of each other's, ids."""
    return session_id if tenant == DEFAULT_TENANT else f"{tenant}{TENANT_SCOPE}{session_id}"


def validate_stream_id(value: str) -> None:
    """A session id, or one scoped by a tenant (``tenant/id``)."""
    tenant, _, session_id = value.rpartition(TENANT_SCOPE)
    validate_session_id(session_id)
    if TENANT_SCOPE in value and not TENANT.fullmatch(tenant):
        raise InvalidRequest(
            f"tenant {quoted(tenant)} in {quoted(value)} must be 1-64 characters of letters, "
            "digits and . _ : @ -"
        )


def check_stream(value: str, tenant: str) -> None:
    """A new session's stream id must be its tenant's: no session is stored in
    another tenant's namespace."""
    validate_stream_id(value)
    owner, scoped, session_id = value.rpartition(TENANT_SCOPE)
    owned = owner == tenant if scoped else tenant == DEFAULT_TENANT
    if not owned:
        raise InvalidRequest(
            f"stream {quoted(value)} is not tenant {quoted(tenant)}'s; its sessions are "
            f"stored as {quoted(stream_id(tenant, session_id))}"
        )
