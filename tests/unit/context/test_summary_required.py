"""A model's summary is checked for the user's words, and what it dropped is put back."""

from __future__ import annotations

import hashlib
import random

import pytest

from domain.content import Entry
from domain.context.summary import (
    missing_facts,
    parse_summary,
    summarize_offline,
    with_required_facts,
)
from tests.support.fidelity import planted_session, survivors
from tests.unit.support import assistant, call, tool, user

INSTRUCTION = "Never deploy on Fridays."
ERROR = "ConnectionRefusedError: [Errno 111] Connection refused"

# What a model that forgot the user's words writes.
FORGETFUL = """## Goal
- Fix the deploy script.

## Constraints
- (none)

## Progress
- Read the script.

## Key Decisions
- (none)

## Next Steps
- Patch it.

## Critical Context
- (none)

## Raw History
- Entries `u1` .. `t1`
"""


def _entries() -> list[Entry]:
    return [
        user(
            f"The deploy of INC-48213 fails: {ERROR}\nFix deploy.sh for it. {INSTRUCTION}",
            id="u1",
        ),
        assistant("Reading it.", id="a1", calls=[call("c1", "read", '{"path": "deploy.sh"}')]),
        tool("c1", "#!/bin/sh\nrsync -a build/ host:/srv\n", id="t1"),
    ]


def test_the_facts_a_model_dropped_are_named() -> None:
    assert missing_facts(FORGETFUL, _entries()) == [INSTRUCTION, "INC-48213", "deploy.sh", ERROR]
    assert missing_facts(summarize_offline(_entries()), _entries()) == []


def test_what_a_model_dropped_is_put_back_in_the_users_lines() -> None:
    restored = with_required_facts(FORGETFUL, _entries())
    sections = parse_summary(restored)
    assert sections["Constraints"] == [f"User instruction (entry u1): {INSTRUCTION}"]
    assert sections["Critical Context"] == [
        "Named by the user: `INC-48213`, `deploy.sh`",
        f"Error reported by the user (entry u1): {ERROR}",
    ]
    # The model's own lines are all still there, in their sections.
    assert sections["Progress"] == ["Read the script."]
    assert sections["Next Steps"] == ["Patch it."]
    assert missing_facts(restored, _entries()) == []
    # Nothing is added twice.
    assert with_required_facts(restored, _entries()) == restored


def test_a_summary_that_holds_them_is_left_as_it_is() -> None:
    offline = summarize_offline(_entries())
    assert with_required_facts(offline, _entries()) == offline


def test_the_users_lines_of_the_previous_summary_are_required_too() -> None:
    previous = summarize_offline(_entries())
    later = [user("Now also update the README.", id="u2")]
    assert missing_facts(FORGETFUL, later, previous) == [
        INSTRUCTION,
        "INC-48213",
        "deploy.sh",
        ERROR,
    ]
    restored = with_required_facts(FORGETFUL, later, previous)
    assert missing_facts(restored, later, previous) == []
    # An identifier list the model kept but shortened is completed in place.
    partial = FORGETFUL.replace(
        "## Critical Context\n- (none)", "## Critical Context\n- Named by the user: `deploy.sh`"
    )
    lines = parse_summary(with_required_facts(partial, later, previous))["Critical Context"]
    assert lines[0] == "Named by the user: `deploy.sh`, `INC-48213`"


def test_a_summary_without_the_sections_gets_them() -> None:
    restored = with_required_facts("The user wants deploy.sh fixed.", _entries())
    sections = parse_summary(restored)
    assert restored.startswith("The user wants deploy.sh fixed.")
    assert sections["Constraints"] == [f"User instruction (entry u1): {INSTRUCTION}"]
    assert "Named by the user: `INC-48213`, `deploy.sh`" in sections["Critical Context"]


def test_under_anonymize_the_placeholders_are_required() -> None:
    restored = with_required_facts(FORGETFUL, _entries(), identifier_policy="anonymize")
    ticket = "<ticket-" + hashlib.sha256(b"INC-48213").hexdigest()[:8] + ">"
    assert ticket in restored
    assert "INC-48213" not in restored
    assert INSTRUCTION in restored


def test_under_custom_only_instructions_are_required() -> None:
    restored = with_required_facts(FORGETFUL, _entries(), identifier_policy="custom")
    assert INSTRUCTION in restored
    assert "INC-48213" not in restored
    with pytest.raises(ValueError, match="identifier_policy"):
        missing_facts(FORGETFUL, _entries(), identifier_policy="drop")


def _lossy_model(prompt_summary: str, rng: random.Random) -> str:
    """A model that keeps the structure but drops every line of the user's words and half
    of its other lines: the worst a summariser may do to them."""
    kept = []
    for line in prompt_summary.splitlines():
        said = line.startswith(("- User instruction", "- Named by the user", "- Error reported"))
        if line.startswith("## ") or (not said and rng.random() < 0.5):
            kept.append(line)
    return "\n".join(kept) + "\n"


@pytest.mark.parametrize("seed", range(2))
def test_every_fact_survives_a_model_that_drops_them_at_every_roll(seed: int) -> None:
    """A 200-turn session compacted by a model that loses what the user said each time:
    restoring after each roll keeps every planted fact to the end."""
    session = planted_session(seed, 200)
    rng = random.Random(seed)
    summary = ""
    start = 0
    entries = session.entries
    restored = 0
    while start < len(entries):
        end = min(len(entries), start + rng.randint(4, 16))
        chunk = entries[start:end]
        # The model is asked with the summary so far; it answers from what it sees.
        answer = _lossy_model(summarize_offline(chunk, previous_summary=summary), rng)
        restored += len(missing_facts(answer, chunk, summary))
        summary = with_required_facts(answer, chunk, summary)
        start = end
    assert restored > len(session.said)
    assert survivors(summary, session.said) == session.said
