"""Limits a provider's refusals taught, forgotten or lifted, end to end: a real server,
SQLite and PostgreSQL, over gRPC.

A client that knows a lesson no longer holds (a proxy's body limit raised, a misread
error, the model moved to a larger deployment) has the session forget it
(UpdateSettings forget_learned_limits), and views use the model's whole window again.
A window inferred from an error that stated none is lifted by itself once the
provider accepts a larger prompt; a window an error stated is not.
"""

from __future__ import annotations

import json
import re

import grpc
import pytest
import structlog.testing
from click.testing import CliRunner

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.cli import cli
from services.grpc.server import RunningServer
from tests.e2e.test_overflow_without_figures import report_figureless_overflow
from tests.e2e.test_request_too_large import rendered_bytes, report_too_large
from tests.support.context_engine import create, of_kind, report_overflow, turn, view
from tests.support.grpc_calls import Stub, append, refused, text

FITTED = "fitted_to_request_bytes"


def forget(store: Stub, session_id: str, **fields: object) -> pb.Session:
    return store.UpdateSettings(
        pb.UpdateSettingsRequest(session_id=session_id, forget_learned_limits=True, **fields)  # type: ignore[arg-type]
    )


def answer(store: Stub, shown: pb.PromptView, prompt_tokens: int) -> None:
    """The model's answer to ``shown``, the provider counting ``prompt_tokens`` of it."""
    append(
        store,
        shown.session_id,
        text(
            pb.ROLE_ASSISTANT,
            "done",
            usage=pb.Usage(input_tokens=prompt_tokens, output_tokens=3),
            prompt_ref=pb.PromptRef(
                version=shown.version, format=pb.PROMPT_FORMAT_OPENAI, hash=shown.request_hash
            ),
        ),
    )


def in_force(store: Stub, session_id: str) -> tuple[int, str]:
    """The window in force and its source, as views and the session agree on them."""
    shown = view(store, session_id)
    got = store.GetSession(pb.GetSessionRequest(session_id=session_id))
    assert (got.settings.context_window_tokens, got.context_window_source) == (
        shown.context_window_tokens,
        shown.guard.source,
    )
    return shown.context_window_tokens, shown.guard.source


def teach_inferred_window(store: Stub, session_id: str) -> int:
    """A figure-less overflow of the view now: it teaches the refused prompt's size."""
    shown = view(store, session_id, format=pb.PROMPT_FORMAT_OPENAI)
    report_figureless_overflow(store, shown)
    learned = of_kind(store, session_id, "overflow_reported")[-1]
    window = learned.overflow_reported.learned_window_tokens
    assert in_force(store, session_id) == (window, "learned")
    return window


def test_a_byte_limit_forgotten_leaves_views_unfitted(store: Stub) -> None:
    session = create(store, model="gpt-4o", compaction=pb.CompactionPolicy(keep_recent_tokens=500))
    for n in range(4):
        turn(store, session.id, n, output_chars=12_000)
    refused_view = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    refused_view.session_id = session.id
    report_too_large(store, refused_view, rendered_bytes(refused_view))
    learned = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    allowed = learned.request_bytes_allowed
    assert allowed and learned.limits_forgotten_version == 0
    fitted = []
    for n in range(4, 8):
        turn(store, session.id, n, output_chars=12_000)
        later = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
        assert rendered_bytes(later) <= allowed
        fitted += [a for a in later.actions if a.kind == FITTED]
    assert fitted, "no view was over the limit: the test proved nothing"
    version = store.GetSession(pb.GetSessionRequest(session_id=session.id)).version

    # Checked against the version like any settings change: a stale one changes nothing.
    stale = version - 1
    refused(lambda: forget(store, session.id, expected_version=stale), grpc.StatusCode.ABORTED)
    assert not of_kind(store, session.id, "learned_limits_forgotten")
    forgot = forget(store, session.id, expected_version=version)

    assert forgot.version == version + 1
    (event,) = of_kind(store, session.id, "learned_limits_forgotten")
    assert event.version == forgot.version
    (limits,) = event.learned_limits_forgotten.models
    assert (limits.model, limits.request_bytes) == ("gpt-4o", learned.learned_request_bytes)
    report = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    assert (report.learned_request_bytes, report.request_bytes_allowed) == (0, 0)
    assert report.limits_forgotten_version == forgot.version
    # Asked again, with nothing learned since, it records nothing.
    assert forget(store, session.id).version == forgot.version
    # The views grow past the limit forgotten, within the model's window.
    for n in range(8, 20):
        turn(store, session.id, n, output_chars=12_000)
        later = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
        assert not [a for a in later.actions if a.kind == FITTED]
        if rendered_bytes(later) > allowed:
            break
    else:
        pytest.fail("the views never grew past the limit forgotten")
    assert (later.context_window_tokens, later.guard.source) == (128_000, "model")


def test_an_inferred_window_forgotten_gives_views_the_models_window(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    for n in range(8):
        turn(store, session.id, n, output_chars=12_000)
    window = teach_inferred_window(store, session.id)
    assert window < 128_000
    for n in range(8, 11):
        turn(store, session.id, n, output_chars=12_000)
        later = view(store, session.id)
        assert later.context_window_tokens == window
        assert later.estimated_tokens <= later.budget_tokens < window
    before = later.version

    forget(store, session.id)

    assert in_force(store, session.id) == (128_000, "model")
    (event,) = of_kind(store, session.id, "learned_limits_forgotten")
    (limits,) = event.learned_limits_forgotten.models
    assert (limits.window_tokens, limits.window_inferred) == (window, True)
    # The lesson stays in the log, and a replay to before shows the window then in force.
    assert of_kind(store, session.id, "overflow_reported")
    assert view(store, session.id, version=before).context_window_tokens == window
    report = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    assert (report.window.window_tokens, report.window.source) == (128_000, "model")


def test_a_usage_report_above_an_inferred_window_lifts_it(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    for n in range(8):
        turn(store, session.id, n, output_chars=12_000)
    window = teach_inferred_window(store, session.id)
    shown = view(store, session.id)

    answer(store, shown, prompt_tokens=window + 1_000)

    assert in_force(store, session.id) == (128_000, "model")
    (lesson,) = of_kind(store, session.id, "entries_appended")[-1].entries_appended.lessons
    assert (lesson.lifted_window_tokens, lesson.provider_tokens) == (window, window + 1_000)
    assert view(store, session.id, version=shown.version).context_window_tokens == window


def test_a_usage_report_above_a_stated_window_leaves_it(store: Stub) -> None:
    """The provider's own figure: a count above it is no proof it serves more."""
    session = create(store, model="gpt-4o")
    for n in range(12):
        turn(store, session.id, n, output_chars=12_000)
    shown = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    error = {
        "message": "This model's maximum context length is 32768 tokens. However, your "
        f"messages resulted in {shown.uncalibrated_tokens} tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
    report_overflow(store, shown, json.dumps({"error": error}))
    assert in_force(store, session.id) == (32_768, "learned")

    answer(store, view(store, session.id), prompt_tokens=40_000)

    assert in_force(store, session.id) == (32_768, "learned")
    (lesson,) = of_kind(store, session.id, "entries_appended")[-1].entries_appended.lessons
    assert (lesson.lifted_window_tokens, lesson.provider_tokens) == (0, 40_000)
    # The client's word forgets it.
    forget(store, session.id)
    assert in_force(store, session.id) == (128_000, "model")


def test_forgetting_is_refused_as_any_settings_change_is(store: Stub) -> None:
    """An unknown session, or settings that are no settings: a clear status, and
    nothing is forgotten."""
    message = refused(lambda: forget(store, "no-such-session"), grpc.StatusCode.NOT_FOUND)
    assert "no-such-session" in message
    session = create(store, model="gpt-4o")
    for n in range(8):
        turn(store, session.id, n, output_chars=12_000)
    window = teach_inferred_window(store, session.id)
    version = store.GetSession(pb.GetSessionRequest(session_id=session.id)).version
    wrong = pb.SessionSettings(compaction=pb.CompactionPolicy(threshold_ratio=2.0))
    refused(lambda: forget(store, session.id, settings=wrong), grpc.StatusCode.INVALID_ARGUMENT)
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == version
    assert in_force(store, session.id) == (window, "learned")
    # A change and the forgetting in one request: both, the forgetting first.
    titled = forget(store, session.id, settings=pb.SessionSettings(title="moved"))
    assert (titled.version, titled.settings.title) == (version + 2, "moved")
    (forgot,) = of_kind(store, session.id, "learned_limits_forgotten")
    assert (forgot.version, of_kind(store, session.id, "settings_changed")[-1].version) == (
        version + 1,
        version + 2,
    )
    assert in_force(store, session.id) == (128_000, "model")


def test_the_cli_forgets_and_shows_what_was_forgotten_and_lifted(
    server: RunningServer, store: Stub
) -> None:
    address = f"127.0.0.1:{server.port}"

    def ok(*args: str) -> str:
        # The in-process server's log lines stay out of the command's output.
        with structlog.testing.capture_logs():
            result = CliRunner().invoke(cli, ["--address", address, *args])
        assert result.exit_code == 0, (result.output, result.exception)
        return result.stdout

    session = create(store, model="gpt-4o")
    for n in range(8):
        turn(store, session.id, n, output_chars=12_000)
    window = teach_inferred_window(store, session.id)

    changed = ok("settings", session.id, "--forget-learned-limits")

    assert "window 128,000 tokens (from model)" in changed
    assert "no window or byte limit learned from overflow errors is in force" in changed
    forgot_at = of_kind(store, session.id, "learned_limits_forgotten")[0].version
    assert re.search(
        rf"^#{forgot_at}\s.*forgot\s+gpt-4o: inferred window of {window:,} tokens$",
        ok("events", session.id),
        re.MULTILINE,
    )
    assert re.search(
        rf"^forgotten\s+learned limits, at version {forgot_at}$",
        ok("status", session.id),
        re.MULTILINE,
    )
    # Taught again, then lifted by a larger prompt the provider accepted.
    window = teach_inferred_window(store, session.id)
    answer(store, view(store, session.id), prompt_tokens=window + 500)
    assert re.search(
        rf"^ +lifted the inferred window of {window:,} tokens: the provider accepted a "
        rf"prompt of {window + 500:,}$",
        ok("events", session.id),
        re.MULTILINE,
    )
