"""Every event type a session records is one readers must handle.

The history fold and the proto mapping dispatch with match and
``assert_never`` over ``SessionEvent``; mypy proves them exhaustive for the
types in that union. This test proves the union holds every event the
aggregate defines, so a new event cannot slip past both.
"""

from __future__ import annotations

import typing

from domain.session import Session, SessionEvent


def test_the_session_event_union_holds_every_event_the_aggregate_defines() -> None:
    defined = {
        value
        for value in vars(Session).values()
        if isinstance(value, type)
        and issubclass(value, Session.Event)
        and value is not Session.Event
    }
    assert set(typing.get_args(SessionEvent)) == defined
