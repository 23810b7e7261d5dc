"""Every RPC of the SessionStore service has a permission, and roles grant what they say."""

from __future__ import annotations

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.tenancy import Permission, Principal, Role
from services.grpc.permissions import METHOD_PERMISSIONS


def test_every_rpc_of_the_proto_has_a_permission_and_no_other_name_does() -> None:
    methods = {m.name for m in pb.DESCRIPTOR.services_by_name["SessionStore"].methods}
    assert methods - METHOD_PERMISSIONS.keys() == set(), "add these RPCs to METHOD_PERMISSIONS"
    assert METHOD_PERMISSIONS.keys() - methods == set(), "these are not RPCs of the proto"


def test_calls_that_change_a_session_need_write() -> None:
    for method in ("AppendEntries", "UpdateSettings", "SetSystemPrompt", "ImportSession"):
        assert METHOD_PERMISSIONS[method] is Permission.WRITE
    for method in ("GetSession", "ListSessions", "ReadEvents", "ExportSession", "AuditView"):
        assert METHOD_PERMISSIONS[method] is Permission.READ


def test_roles_grant_their_permissions_and_tenants() -> None:
    tenant = Principal("ci", "acme", Role.TENANT)
    auditor = Principal("audit", "acme", Role.AUDITOR)
    admin = Principal("ops", "ops", Role.ADMIN)
    assert tenant.may(Permission.WRITE) and not tenant.may(Permission.ADMIN)
    assert auditor.may(Permission.READ) and not auditor.may(Permission.WRITE)
    assert all(admin.may(p) for p in Permission)
    assert tenant.sees("acme") and not tenant.sees("other")
    assert auditor.sees("acme") and not auditor.sees("other")
    assert admin.sees("acme") and admin.sees("other")
