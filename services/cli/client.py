"""The connection to the server, short entry ids, and how failures are reported.

Every command gets a `Client` (through `pass_client`), whose `api` is the
Python client package's `sessionstore_client.Client`: the CLI is one of its
users. A failed call becomes one line on stderr (a JSON object with --json)
and an exit code, never a traceback: 1 when the server (or the CLI, for an
entry id it cannot resolve) refused the request, 2 when the server could not
be reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import grpc
import sessionstore_client
from sessionstore_client import TLS, EntriesAppended, Entry
from sessionstore_client.errors import NotFound, SessionStoreError

from services.cli.output import print_json

DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_TIMEOUT_SECONDS = 10.0
EXIT_REFUSED = 1
EXIT_UNREACHABLE = 2
# An ambiguous short id lists the ids it could mean, up to this many.
_MOST_LISTED = 20


class Refused(Exception):
    """A request the CLI refuses itself, reported like the server's refusals."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Security:
    """How to reach a server: its token, and the TLS files (none: plain TCP)."""

    token: str = ""
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    @property
    def tls(self) -> TLS | bool:
        if self.ca_file is None and self.cert_file is None:
            return False
        return TLS(self.ca_file, self.cert_file, self.key_file)


@dataclass
class Client:
    """What every command needs: where the server is, and how to print."""

    address: str
    timeout: float
    as_json: bool
    security: Security = field(default_factory=Security, repr=False)
    # Whether --timeout was given: a command that may take long (`compact`) otherwise
    # waits as long as its work may take.
    timeout_given: bool = False
    _api: sessionstore_client.Client | None = field(default=None, repr=False)

    @property
    def api(self) -> sessionstore_client.Client:
        # Connect on first use, so `--help` and usage errors never touch the network.
        if self._api is None:
            self._api = sessionstore_client.Client(
                self.address,
                token=self.security.token,
                tls=self.security.tls,
                timeout=self.timeout,
            )
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.close()

    def resolve_entry_ids(self, session: str, given: Sequence[str]) -> list[str]:
        """The entry ids meant by `given`: each an exact id or a unique prefix of one.

        `log` and `events` print ids cut short, so any command taking an entry
        id takes the short form too. An exact id wins over a longer id it begins.
        """
        resolved = [g if self.entry(session, g) is not None else "" for g in given]
        if all(resolved):
            return resolved
        known = self._entry_ids(session)
        return [
            found or _by_prefix(session, g, known) for found, g in zip(resolved, given, strict=True)
        ]

    def resolve_entry_id(self, session: str, given: str) -> str:
        return self.resolve_entry_ids(session, [given])[0]

    def entry(self, session: str, entry_id: str) -> Entry | None:
        """The entry with exactly this id; None if the session has none."""
        try:
            return self.api.get_entry(session, entry_id=entry_id)
        except NotFound:
            return None

    def _entry_ids(self, session: str) -> list[str]:
        return [
            entry.id
            for event in self.api.read_events(session)
            if isinstance(event.event, EntriesAppended)
            for entry in event.event.entries
        ]


def _by_prefix(session: str, prefix: str, known: Sequence[str]) -> str:
    matches = [entry_id for entry_id in known if entry_id.startswith(prefix)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise Refused(
            grpc.StatusCode.NOT_FOUND,
            f"session {session!r} has no entry whose id is or begins with {prefix!r}",
        )
    listed = ", ".join(matches[:_MOST_LISTED])
    if len(matches) > _MOST_LISTED:
        listed += f" and {len(matches) - _MOST_LISTED:,} more"
    raise Refused(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"{prefix!r} begins {len(matches):,} entry ids of session {session!r}; "
        f"give more of the one you mean: {listed}",
    )


pass_client = click.make_pass_decorator(Client)


def report(error: SessionStoreError | Refused, client: Client | None, as_json: bool) -> int:
    """Prints why the request failed, on stderr; returns the exit code."""
    code, details = error.code, error.message
    address = client.address if client else "?"
    hint = ""
    exit_code = EXIT_REFUSED
    if code is grpc.StatusCode.UNAVAILABLE:
        details = f"cannot reach the session store at {address} ({details})"
        exit_code = EXIT_UNREACHABLE
    elif code is grpc.StatusCode.DEADLINE_EXCEEDED:
        timeout = client.timeout if client else DEFAULT_TIMEOUT_SECONDS
        details = (
            f"no answer from the session store at {address} within {timeout:g}s "
            "(--timeout waits longer)"
        )
        exit_code = EXIT_UNREACHABLE
    elif code is grpc.StatusCode.ABORTED:
        hint = (
            "the session moved on since you read it; re-read it with `show` or `log` "
            "and retry with its current version as --expected-version"
        )
    if as_json:
        body: dict[str, Any] = {"code": code.name, "message": details}
        if hint:
            body["hint"] = hint
        print_json({"error": body}, one_line=True, err=True)
    else:
        click.echo(f"error: {code.name}: {details}", err=True)
        if hint:
            click.echo(f"hint: {hint}", err=True)
    return exit_code
