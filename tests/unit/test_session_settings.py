"""Starting a session and changing its settings: what the aggregate accepts and refuses."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from domain.errors import InvalidRequest, InvalidSettings
from domain.session import Session
from domain.settings import CompactionPolicy, PruningPolicy, SessionSettings
from tests.unit.support import WINDOW, Tracked


def test_start_records_settings_and_window() -> None:
    """A new session is at version 1 with its settings and resolved window."""
    settings = SessionSettings(model="gpt-4o", title="t")
    session = Session.start("abc:1@x", settings, (128_000, "model"))
    assert session.version == 1
    assert session.settings == settings
    assert (session.context_window_tokens, session.context_window_source) == (128_000, "model")
    assert session.entry_count == 0
    assert session.last_entry_id is None


@pytest.mark.parametrize("session_id", ["", "has space", "a/", "x" * 129, "ü", "a b/c"])
def test_start_refuses_bad_session_id(session_id: str) -> None:
    """Session ids are 1-128 characters from a small safe alphabet."""
    with pytest.raises(InvalidRequest, match=r"session id|tenant"):
        Session.start(session_id, SessionSettings(), (200_000, "default"))


def test_a_session_is_stored_in_its_own_tenants_stream() -> None:
    """The default tenant's sessions by their bare ids, another's as tenant/id."""
    settings, window = SessionSettings(), (200_000, "default")
    assert Session.start("abc", settings, window).id == "abc"
    assert Session.start("acme/abc", settings, window, tenant="acme").id == "acme/abc"
    for stream, tenant in (("abc", "acme"), ("acme/abc", "default"), ("other/abc", "acme")):
        with pytest.raises(InvalidRequest, match="is not tenant"):
            Session.start(stream, settings, window, tenant=tenant)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (SessionSettings(context_window_tokens=-1), "context_window_tokens"),
        (SessionSettings(max_entry_bytes=0), "max_entry_bytes"),
        (SessionSettings(title="t" * 501), "title"),
        (
            SessionSettings(labels=MappingProxyType({str(i): "v" for i in range(65)})),
            "labels",
        ),
        (SessionSettings(pruning=PruningPolicy(mode="aggressive")), "pruning.mode"),
        (SessionSettings(pruning=PruningPolicy(soft_trim_ratio=0)), "soft_trim_ratio"),
        (SessionSettings(pruning=PruningPolicy(hard_clear_ratio=1.5)), "hard_clear_ratio"),
        (SessionSettings(pruning=PruningPolicy(ttl_seconds=-1)), "pruning.ttl_seconds"),
        (SessionSettings(compaction=CompactionPolicy(threshold_ratio=0)), "threshold_ratio"),
        (
            SessionSettings(compaction=CompactionPolicy(identifier_policy="drop")),
            "identifier_policy",
        ),
        (
            SessionSettings(compaction=CompactionPolicy(keep_recent_tokens=-5)),
            "compaction.keep_recent_tokens",
        ),
    ],
)
def test_invalid_settings_are_refused_at_start_and_on_change(
    settings: SessionSettings, message: str
) -> None:
    """Settings are validated both when a session starts and when they change."""
    with pytest.raises(InvalidSettings, match=message):
        Session.start("s", settings, (200_000, "default"))
    tracked = Tracked()
    with pytest.raises(InvalidSettings, match=message):
        tracked.change_settings(settings)
    assert tracked.session.settings == SessionSettings()


def test_change_settings_updates_window() -> None:
    """A settings change replaces the settings and the resolved window."""
    tracked = Tracked()
    tracked.change_settings(SessionSettings(context_window_tokens=50_000), (50_000, "session"))
    assert tracked.session.settings.context_window_tokens == 50_000
    assert tracked.session.context_window_source == "session"
    assert tracked.version == 2


def test_a_settings_change_that_changes_nothing_records_nothing() -> None:
    tracked = Tracked(settings=SessionSettings(title="t"))
    version = tracked.version
    tracked.change_settings(SessionSettings(title="t"))
    assert tracked.version == version
    tracked.change_settings(SessionSettings(title="t"), window=(100_000, "session"))
    assert tracked.version == version + 1


def test_max_entry_bytes_cannot_exceed_what_the_server_can_take() -> None:
    with pytest.raises(InvalidSettings, match="over this server's limit"):
        Session.start(
            "s", SessionSettings(max_entry_bytes=32 << 20), WINDOW, max_entry_bytes_limit=16 << 20
        )
    tracked = Tracked()
    with pytest.raises(InvalidSettings, match="over this server's limit"):
        tracked.session.change_settings(
            SessionSettings(max_entry_bytes=17 << 20), WINDOW, max_entry_bytes_limit=16 << 20
        )
