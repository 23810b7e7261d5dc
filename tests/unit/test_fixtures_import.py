"""Real pi v3 transcripts, imported turn by turn, survive the store and render validly.

See /work/shared/fixtures/sessions/SOURCES.md. The OpenClaw transcript holds a
hostile prompt in one tool result: here it is only data that is stored,
compared and rendered locally, never sent anywhere.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from domain.content import Role
from projections.prompt_formats import to_anthropic, to_openai
from tests.unit.pi_transcript import PiTranscript, read_pi_transcript, turns
from tests.unit.support import Tracked, custom

# The shared fixtures sit beside the repository (../shared), as in CI.
_REPO = Path(__file__).resolve().parents[2]
FIXTURES = next(
    (
        candidate / "fixtures" / "sessions"
        for candidate in (_REPO.parent / "shared", Path("/work/shared"))
        if (candidate / "fixtures" / "sessions").is_dir()
    ),
    _REPO.parent / "shared" / "fixtures" / "sessions",
)
OPENCLAW = FIXTURES / "openclaw" / "8555a0a4-0b79-459d-939c-e17cdbbf4fe2.jsonl"
SMALL = FIXTURES / "agent-sessions-pi" / "small.jsonl"

# Away from a checkout with shared/ beside it the transcript tests skip; in CI
# they never do (tests/conftest.py refuses to run without the fixtures).
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared fixtures not present")
pytestmark = needs_fixtures

# file, messages kept, messages skipped (empty failed assistant turns), tool calls
CASES = [(OPENCLAW, 33, 32, 6), (SMALL, 4, 0, 0)]


def _imported(path: Path) -> tuple[PiTranscript, Tracked]:
    transcript = read_pi_transcript(path)
    tracked = Tracked(transcript.session_id)
    for turn in turns(transcript.entries):
        tracked.append(*turn)
    return transcript, tracked


@pytest.mark.parametrize(("path", "kept", "skipped", "calls"), CASES, ids=["openclaw", "small"])
def test_conversion_counts(path: Path, kept: int, skipped: int, calls: int) -> None:
    """Every message is converted except empty assistant turns; parents form one chain."""
    transcript = read_pi_transcript(path)
    assert len(transcript.entries) == kept
    assert len(transcript.skipped) == skipped
    assert sum(len(e.tool_calls) for e in transcript.entries) == calls
    assert sum(len(e.tool_results) for e in transcript.entries) == calls
    ids = [e.id for e in transcript.entries]
    assert [e.parent_id for e in transcript.entries] == [None, *ids[:-1]]


@pytest.mark.parametrize(("path", "kept", "skipped", "calls"), CASES, ids=["openclaw", "small"])
def test_durable_log_holds_every_entry(path: Path, kept: int, skipped: int, calls: int) -> None:
    """Appended turn by turn, every converted entry is in the log unchanged, and no call is
    left open."""
    transcript, tracked = _imported(path)
    log = tracked.history.durable_log()
    assert list(log.entries) == transcript.entries
    assert log.total_tokens == sum(e.token_count for e in transcript.entries)
    assert tracked.session.open_tool_calls == {}
    assert tracked.session.entry_count == kept


@pytest.mark.parametrize(("path", "kept", "skipped", "calls"), CASES, ids=["openclaw", "small"])
def test_every_tool_result_answers_an_earlier_call(
    path: Path, kept: int, skipped: int, calls: int
) -> None:
    """Each tool result's call id was made by an earlier assistant entry, and answered once."""
    _, tracked = _imported(path)
    made: dict[str, int] = {}
    answered: list[str] = []
    for position, entry in enumerate(tracked.history.durable_log().entries):
        made.update((c.id, position) for c in entry.tool_calls)
        for result in entry.tool_results:
            assert made[result.tool_call_id] < position
            answered.append(result.tool_call_id)
    assert sorted(answered) == sorted(made)
    assert len(answered) == calls


def _openai_pairs_ok(messages: list[dict[str, Any]]) -> None:
    """Every assistant message with tool_calls is directly followed by one tool message per
    call, with those ids; no tool message appears anywhere else."""
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message["role"] != "tool", f"orphan tool message at {i}"
        ids = [c["id"] for c in message.get("tool_calls", [])]
        following = messages[i + 1 : i + 1 + len(ids)]
        assert [m["role"] for m in following] == ["tool"] * len(ids)
        assert sorted(m["tool_call_id"] for m in following) == sorted(ids)
        i += 1 + len(ids)


def _anthropic_pairs_ok(messages: list[dict[str, Any]]) -> None:
    """Roles alternate; each tool_use is answered in the next (user) message, whose tool_result
    blocks come first; no tool_result answers anything else."""
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert all(b["type"] != "tool_result" for b in messages[0]["content"])
    for i, message in enumerate(messages):
        if message["role"] == "user":
            continue
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        results: list[str] = []
        if i + 1 < len(messages):
            blocks = messages[i + 1]["content"]
            leading = [b for b in blocks[: len(uses)] if b["type"] == "tool_result"]
            results = [b["tool_use_id"] for b in leading]
            assert all(b["type"] != "tool_result" for b in blocks[len(uses) :])
        assert sorted(results) == sorted(uses)


@pytest.mark.parametrize(("path", "kept", "skipped", "calls"), CASES, ids=["openclaw", "small"])
def test_renderings_pair_every_call_with_its_result(
    path: Path, kept: int, skipped: int, calls: int
) -> None:
    """OpenAI and Anthropic renderings keep each tool call next to its result."""
    _, tracked = _imported(path)
    view = tracked.history.prompt_view()
    openai = to_openai(view)
    _openai_pairs_ok(openai)
    assert sum(len(m.get("tool_calls", [])) for m in openai) == calls
    system, anthropic = to_anthropic(view)
    assert system == []
    _anthropic_pairs_ok(anthropic)
    uses = [b for m in anthropic for b in m["content"] if b["type"] == "tool_use"]
    assert len(uses) == calls
    assert all(isinstance(b["input"], dict) for b in uses)


def test_openclaw_compacted_at_each_user_turn_still_renders_validly() -> None:
    """Compacting the imported session at each user turn in order keeps calls paired."""
    transcript, tracked = _imported(OPENCLAW)
    user_ids = [e.id for e in transcript.entries if e.role is Role.USER]
    for number, user_id in enumerate(user_ids, start=1):
        tracked.compact(user_id, summary=f"summary of the turns before user turn {number}")
        view = tracked.history.prompt_view()
        assert view.log.entries[0].id == user_id
        _openai_pairs_ok(to_openai(view))
        _anthropic_pairs_ok(to_anthropic(view)[1])
        # A compaction cannot directly follow another: the runtime notes something first.
        tracked.append(custom(f"compacted {number}"))
    assert tracked.session.compaction_count == len(user_ids)
