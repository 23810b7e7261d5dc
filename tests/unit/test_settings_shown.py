"""A session's settings shown as a message: built once per settings object and window,
and never shown for settings or a window they are not."""

from __future__ import annotations

import dataclasses

from domain.settings import SessionSettings
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.grpc.mapping_sessions import settings_to_pb


def test_the_same_settings_and_window_are_built_once() -> None:
    settings = SessionSettings(model="gpt-4o", title="first")
    assert settings_to_pb(settings, 128_000) is settings_to_pb(settings, 128_000)


def test_other_settings_or_another_window_are_shown_as_they_are() -> None:
    settings = SessionSettings(model="gpt-4o", title="first")
    shown = settings_to_pb(settings, 128_000)
    # An update makes new settings; an overflow teaches a smaller window.
    changed = dataclasses.replace(settings, title="second")
    assert settings_to_pb(changed, 128_000).title == "second"
    assert settings_to_pb(settings, 64_000).context_window_tokens == 64_000
    assert settings_to_pb(settings, 128_000).title == "first"
    assert shown.title == "first"
    assert shown.context_window_tokens == 128_000


def test_a_session_message_copies_the_shown_settings() -> None:
    settings = SessionSettings(model="gpt-4o", title="first")
    session = pb.Session(id="s-1", settings=settings_to_pb(settings, 128_000))
    session.settings.title = "changed by a caller"
    assert settings_to_pb(settings, 128_000).title == "first"
