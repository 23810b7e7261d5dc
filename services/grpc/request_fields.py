"""Reading and checking the request fields several RPCs share.

A bad value is refused here as INVALID_ARGUMENT with what to send instead,
before any use case runs.
"""

from __future__ import annotations

import time
from typing import Any

import grpc

from domain.content import validate_id
from domain.errors import InvalidRequest
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.queries import AsOf
from services.grpc import mapping

NO_DEADLINE_SECONDS = 365 * 24 * 3600
FOREIGN_TOKEN = "{field} is not one this server gave out; send the next_page_token of a page"


def count(token: str, field: str) -> int:
    """A non-negative int64 written in ASCII digits, as page tokens carry them."""
    if not (token.isascii() and token.isdigit() and len(token) <= 18):
        raise InvalidRequest(FOREIGN_TOKEN.format(field=field))
    return int(token)


def page_size(request: pb.GetViewRequest | pb.AuditViewRequest | pb.GetCompactionRequest) -> int:
    """Entries a paged read may answer at most (0: as many as fit in one message)."""
    if request.page_size < 0:
        raise InvalidRequest(
            f"page_size {request.page_size} is negative; send 0 for as many entries as "
            "fit in one message"
        )
    return request.page_size


def check_page_offset(offset: int, items: int) -> None:
    """Refuses a page token's offset past the end of what it pages (not one of ours)."""
    if offset > items:
        raise InvalidRequest(FOREIGN_TOKEN.format(field="page_token"))


def page_token(token: str) -> tuple[int, int]:
    """A paged read's token, "<version>.<offset>": the version its pages are of (the
    compaction's, for its replaced entries) and the item the page starts at."""
    version, _, offset = token.partition(".")
    parsed = count(version, "page_token"), count(offset, "page_token")
    if parsed[0] < 1:
        raise InvalidRequest(FOREIGN_TOKEN.format(field="page_token"))
    return parsed


def entry_id(value: str, field: str) -> str:
    if not value:
        raise InvalidRequest(f"{field} is required")
    validate_id(value, field)
    return value


def expected_version(request: object) -> int | None:
    return request.expected_version if request.HasField("expected_version") else None  # type: ignore[attr-defined]


def as_of(request: pb.GetViewRequest | pb.GetPromptViewRequest | pb.AuditViewRequest) -> AsOf:
    which = request.WhichOneof("as_of")
    if which == "version":
        if request.version < 1:
            raise InvalidRequest("version must be 1 or more; leave as_of unset for the latest")
        return AsOf(version=request.version)
    if which == "time":
        return AsOf(time=mapping.to_datetime(request.time, "time"))
    return AsOf()


def token_budget(request: pb.GetPromptViewRequest | pb.ViewAfterAppend) -> int | None:
    if not request.HasField("token_budget"):
        return None
    if request.token_budget < 1:
        raise InvalidRequest("token_budget must be 1 or more; leave it unset for the session's own")
    return request.token_budget


def held(request: pb.GetPromptViewRequest | pb.ViewAfterAppend) -> tuple[int, str] | None:
    if not request.HasField("held_version"):
        return None
    if request.held_version < 1 or not request.held_hash:
        raise InvalidRequest(
            "held_version must be 1 or more and come with held_hash, the request_hash of "
            "the view you hold"
        )
    return request.held_version, request.held_hash


def deadline(context: grpc.ServicerContext) -> float | None:
    """The client's deadline on the time.monotonic() clock, if it set one."""
    remaining = context.time_remaining()
    # Without a deadline gRPC answers a remaining time of centuries.
    if remaining is None or remaining > NO_DEADLINE_SECONDS:
        return None
    return time.monotonic() + remaining


def micros(request: Any, name: str) -> int | None:
    """A Timestamp field in microseconds since the epoch; None when it is not set."""
    if not request.HasField(name):
        return None
    moment = mapping.to_datetime(getattr(request, name), name)
    return int(moment.timestamp() * 1_000_000)
