"""The ids a session has used, asked for in one question per append.

Entry ids and tool call ids are unique within a session, and a parent id must
name an entry of the session. Checking that against the whole history would
make the first write to a session cost as much as reading all of it, so the
aggregate asks this narrow port instead: the store answers from an index.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from domain.compaction import History


@dataclass(frozen=True)
class UsedIds:
    """Those of the asked ids that the session already holds."""

    entry_ids: frozenset[str] = frozenset()
    call_ids: frozenset[str] = frozenset()


class IdLookup(Protocol):
    def used(self, entry_ids: Collection[str], call_ids: Collection[str]) -> UsedIds:
        """Which of these entry ids and tool call ids the session has already used."""


class HistoryIds:
    """The lookup answered from a full history, where one is at hand anyway."""

    def __init__(self, history: History) -> None:
        self._history = history

    def used(self, entry_ids: Collection[str], call_ids: Collection[str]) -> UsedIds:
        return UsedIds(
            frozenset(i for i in entry_ids if self._history.position_of(i) is not None),
            frozenset(i for i in call_ids if self._history.call_position(i) is not None),
        )


def new_id() -> str:
    """A fresh id, for an entry or a session the client left unnamed."""
    return uuid.uuid4().hex
