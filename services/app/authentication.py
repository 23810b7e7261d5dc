"""Bearer tokens: the tokens file, and telling a caller from the token it sends.

The file lists each token by the SHA-256 of its text only, so reading it
never gives a token away. `sessionstore token new` makes a token and prints
the entry to add:

    [[tokens]]
    name = "ci"
    tenant = "acme"
    role = "tenant"          # tenant, auditor or admin
    sha256 = "9f86d08..."

Nothing here knows about gRPC: the transport hands over the authorization
header's value and the permission its method needs, and maps the two
refusals below to its own statuses.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from services.app.tenancy import Permission, Principal, Role

TOKEN_BYTES = 32
NAME = re.compile(r"[A-Za-z0-9._:@-]{1,64}")
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
SEND_TOKEN = (
    "send the metadata 'authorization: Bearer <token>' with a token listed in the server's "
    "tokens file (the CLI: --token or SESSIONSTORE_TOKEN)"
)


class TokensFileError(ValueError):
    """The tokens file cannot be used; the message says where and why."""


class Unauthenticated(Exception):
    """No token, or one the server does not know."""

    # Named as a domain refusal's is, for the client's ErrorInfo.
    reason = "unauthenticated"
    metadata: dict[str, str] = {}  # noqa: RUF012  (never mutated)


class PermissionDenied(Exception):
    """A known caller whose role does not allow the call."""

    reason = "permission_denied"
    metadata: dict[str, str] = {}  # noqa: RUF012  (never mutated)


@dataclass(frozen=True)
class TokenEntry:
    principal: Principal
    sha256: str


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_entry_toml(name: str, tenant: str, role: Role, token: str) -> str:
    """The tokens file entry for ``token``, which itself is not in it."""
    return (
        "[[tokens]]\n"
        f'name = "{name}"\n'
        f'tenant = "{tenant}"\n'
        f'role = "{role.value}"\n'
        f'sha256 = "{token_digest(token)}"\n'
    )


def check_name(value: str, what: str) -> str:
    if not NAME.fullmatch(value):
        raise ValueError(f"{what} {value!r} must be 1 to 64 letters, digits or . _ : @ -")
    return value


def parse_role(value: str) -> Role:
    try:
        return Role(value)
    except ValueError:
        raise ValueError(
            f"role {value!r} is not one of {', '.join(r.value for r in Role)}"
        ) from None


class TokenBook:
    """The tokens a server accepts, each standing for a principal."""

    def __init__(self, entries: Sequence[TokenEntry]) -> None:
        self.entries = tuple(entries)

    @classmethod
    def load(cls, path: Path) -> TokenBook:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise TokensFileError(f"cannot read the tokens file {path}: {error.strerror}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise TokensFileError(f"the tokens file {path} is not valid TOML: {error}") from None
        tables = data.get("tokens", [])
        if not isinstance(tables, list) or not tables:
            raise TokensFileError(
                f"the tokens file {path} lists no [[tokens]]; add the entries that "
                "`sessionstore token new` prints"
            )
        entries, names, digests = [], set(), set()
        for index, table in enumerate(tables, 1):
            try:
                entry = _entry(table)
            except (ValueError, TypeError, KeyError) as error:
                raise TokensFileError(f"{path}, token {index}: {error}") from None
            if entry.principal.name in names or entry.sha256 in digests:
                raise TokensFileError(f"{path}, token {index}: its name or hash is listed twice")
            names.add(entry.principal.name)
            digests.add(entry.sha256)
            entries.append(entry)
        return cls(entries)

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of the header's bearer token."""
        if not authorization:
            raise Unauthenticated(f"this server needs a bearer token: {SEND_TOKEN}")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated(f"the authorization metadata is not a bearer token: {SEND_TOKEN}")
        digest = token_digest(token)
        found = None
        for entry in self.entries:  # every entry compared, found or not
            if hmac.compare_digest(entry.sha256, digest):
                found = entry.principal
        if found is None:
            raise Unauthenticated(f"the bearer token is not one this server knows: {SEND_TOKEN}")
        return found


def authorize(principal: Principal, permission: Permission, method: str) -> None:
    if not principal.may(permission):
        raise PermissionDenied(
            f"token {principal.name!r} (role {principal.role.value}) may not call {method}: "
            f"it needs {permission.value} permission; use a token of a role that has it"
        )


def _entry(table: object) -> TokenEntry:
    if not isinstance(table, dict):
        raise TypeError("each [[tokens]] entry must be a table")
    unknown = set(table) - {"name", "tenant", "role", "sha256"}
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}; use name, tenant, role and sha256")
    for key in ("name", "tenant", "role", "sha256"):
        if not isinstance(table.get(key), str):
            raise ValueError(f"{key} is required, as a string")
    digest = table["sha256"].lower()
    if not SHA256_HEX.fullmatch(digest):
        raise ValueError(
            "sha256 must be 64 hex digits, the SHA-256 of the token (never the token itself)"
        )
    principal = Principal(
        check_name(table["name"], "name"),
        check_name(table["tenant"], "tenant"),
        parse_role(table["role"]),
    )
    return TokenEntry(principal, digest)
