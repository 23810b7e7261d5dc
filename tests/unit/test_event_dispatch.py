"""Every event type a session records is one readers must handle.

The history fold and the proto mapping dispatch with match and
``assert_never`` over ``SessionEvent``; mypy proves them exhaustive for the
types in that union. This test proves the union holds every event class
domain.session_events and domain.compaction_events define, so a new event
cannot slip past both.
"""

from __future__ import annotations

import typing

from domain import compaction_events, session_events
from domain.session import SessionEvent
from domain.session_events import Event


def test_the_session_event_union_holds_every_event_defined() -> None:
    defined = {
        value
        for module in (session_events, compaction_events)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Event) and value is not Event
    }
    assert set(typing.get_args(SessionEvent)) == defined
