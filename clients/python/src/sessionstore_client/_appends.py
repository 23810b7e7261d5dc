"""A runtime's entries appended as the store takes them.

The store keeps every tool call paired with its result, as providers want them;
an agent runtime's own store takes whatever it is given. Where the store refuses
what the runtime's would take, the adapters send the entries again, fixed:

- tool call ids the store has seen get ids of their own, and results find their
  call by the id the runtime gives (see ``_call_ids``);
- a message that comes while calls are open (the user moved on without their
  results, a graph interrupted before its tools was given new input) has them
  abandoned first: the store records a synthetic error result for each, so the
  prompt stays one providers take, with the model told the calls never ran;
- a result whose call is no longer open is kept as a note (see ``_call_ids``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sessionstore_client._call_ids import (
    blocked_at,
    needs_new_call_ids,
    needs_open_call_ids,
    with_late_results_as_notes,
    with_new_call_ids,
    with_open_call_ids,
)
from sessionstore_client.aio import AsyncClient
from sessionstore_client.client import Client
from sessionstore_client.errors import AlreadyExists, FailedPrecondition
from sessionstore_client.types import AppendEntriesResponse, Entry

# The ErrorInfo reason of an append refused for calls still open.
TOOL_CALLS_OPEN = "tool_calls_open"
# What the synthetic result of an abandoned call tells the model.
ABANDONED = "the conversation went on before its result came"
# Each remedy changes what is sent (or the session), so a few attempts are plenty;
# the last refusal is raised.
_ATTEMPTS = 4


@dataclass
class _Remedy:
    """What to do for a refused append: append ``first``, abandon the calls then open
    when ``abandon``, and send ``then``."""

    first: list[Entry]
    abandon: bool
    then: list[Entry]


async def append(
    client: AsyncClient,
    session_id: str,
    entries: Sequence[Entry],
    expected_version: int | None = None,
) -> AppendEntriesResponse:
    """Appends ``entries`` (after ``expected_version``, when given), fixed as the store
    wants them when it refuses them as they are."""
    entries = list(entries)
    for _ in range(_ATTEMPTS - 1):
        try:
            return await client.append_entries(
                session_id, entries=entries, expected_version=expected_version
            )
        except (AlreadyExists, FailedPrecondition) as refused:
            session = await client.get_session(session_id)
            remedy = _remedy(entries, refused, session.open_tool_call_ids)
        if remedy.first:
            answer = await append(client, session_id, remedy.first, expected_version)
            expected_version = _after(expected_version, answer.version)
        if remedy.abandon:
            abandoned = await client.abandon_tool_calls(
                session_id, reason=ABANDONED, expected_version=expected_version
            )
            expected_version = _after(expected_version, abandoned.version)
        entries = remedy.then
    return await client.append_entries(
        session_id, entries=entries, expected_version=expected_version
    )


def append_sync(
    client: Client,
    session_id: str,
    entries: Sequence[Entry],
    expected_version: int | None = None,
) -> AppendEntriesResponse:
    """``append``, with the synchronous client."""
    entries = list(entries)
    for _ in range(_ATTEMPTS - 1):
        try:
            return client.append_entries(
                session_id, entries=entries, expected_version=expected_version
            )
        except (AlreadyExists, FailedPrecondition) as refused:
            session = client.get_session(session_id)
            remedy = _remedy(entries, refused, session.open_tool_call_ids)
        if remedy.first:
            answer = append_sync(client, session_id, remedy.first, expected_version)
            expected_version = _after(expected_version, answer.version)
        if remedy.abandon:
            abandoned = client.abandon_tool_calls(
                session_id, reason=ABANDONED, expected_version=expected_version
            )
            expected_version = _after(expected_version, abandoned.version)
        entries = remedy.then
    return client.append_entries(session_id, entries=entries, expected_version=expected_version)


def _remedy(
    entries: list[Entry], refused: AlreadyExists | FailedPrecondition, open_call_ids: list[str]
) -> _Remedy:
    """The remedy for ``refused``; raises it when there is none."""
    if isinstance(refused, AlreadyExists) and needs_new_call_ids(refused.message):
        return _Remedy([], False, with_new_call_ids(entries))
    if isinstance(refused, FailedPrecondition) and needs_open_call_ids(refused.message):
        answering = with_open_call_ids(entries, open_call_ids)
        return _Remedy([], False, with_late_results_as_notes(answering, open_call_ids))
    if refused.reason == TOOL_CALLS_OPEN:
        # What comes before the entry the open calls block goes first: it may answer
        # some of them, or make the calls left open itself.
        blocked = blocked_at(entries, open_call_ids)
        if blocked < len(entries):
            return _Remedy(entries[:blocked], True, entries[blocked:])
    raise refused


def _after(expected_version: int | None, version: int) -> int | None:
    """The version the next write expects: the one just written, when writes expect one."""
    return version if expected_version is not None else None
