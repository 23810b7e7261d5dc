"""The connection to the server, short entry ids, and how failures are reported.

Every command gets a `Client` (through `pass_client`). A failed call becomes
one line on stderr (a JSON object with --json) and an exit code, never a
traceback: 1 when the server (or the CLI, for an entry id it cannot resolve)
refused the request, 2 when the server could not be reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
import grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.cli.connection import Security, open_channel
from services.cli.output import print_json

DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_TIMEOUT_SECONDS = 10.0
EXIT_REFUSED = 1
EXIT_UNREACHABLE = 2
# An ambiguous short id lists the ids it could mean, up to this many.
_MOST_LISTED = 20

Request = TypeVar("Request")
Response = TypeVar("Response")


class Refused(Exception):
    """A request the CLI refuses itself, reported like the server's refusals."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Client:
    """What every command needs: where the server is, and how to print."""

    address: str
    timeout: float
    as_json: bool
    security: Security = field(default_factory=Security, repr=False)
    _channel: grpc.Channel | None = field(default=None, repr=False)
    _stub: pb_grpc.SessionStoreStub | None = field(default=None, repr=False)

    @property
    def stub(self) -> pb_grpc.SessionStoreStub:
        # Connect on first use, so `--help` and usage errors never touch the network.
        if self._stub is None:
            self._channel = open_channel(self.address, self.security)
            self._stub = pb_grpc.SessionStoreStub(self._channel)
        return self._stub

    def call(
        self, method: grpc.UnaryUnaryMultiCallable[Request, Response], request: Request
    ) -> Response:
        """`method(request)` with the CLI's deadline: `client.call(client.stub.GetSession, ...)`."""
        # wait_for_ready=False fails at once when nothing listens, instead of
        # waiting out the deadline; the deadline covers a server that hangs.
        return method(request, timeout=self.timeout, wait_for_ready=False)

    def read_events(
        self, request: pb.ReadEventsRequest, *, deadline: bool = True
    ) -> grpc.CallIterator[pb.SessionEvent]:
        timeout = self.timeout if deadline else None
        return self.stub.ReadEvents(request, timeout=timeout, wait_for_ready=False)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()

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

    def entry(self, session: str, entry_id: str) -> pb.Entry | None:
        """The entry with exactly this id; None if the session has none."""
        request = pb.GetEntryRequest(session_id=session, entry_id=entry_id)
        try:
            return self.call(self.stub.GetEntry, request)
        except grpc.RpcError as error:
            if isinstance(error, grpc.Call) and error.code() is grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def _entry_ids(self, session: str) -> list[str]:
        events = self.read_events(pb.ReadEventsRequest(session_id=session))
        return [
            entry.id
            for event in events
            if event.WhichOneof("event") == "entries_appended"
            for entry in event.entries_appended.entries
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


def report(error: grpc.RpcError | Refused, client: Client | None, as_json: bool) -> int:
    """Prints why the request failed, on stderr; returns the exit code."""
    if isinstance(error, Refused):
        code, details = error.code, error.message
    elif isinstance(error, grpc.Call):
        code, details = error.code(), error.details() or str(error)
    else:
        code, details = grpc.StatusCode.UNKNOWN, str(error)
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
