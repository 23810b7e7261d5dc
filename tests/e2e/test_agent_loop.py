"""An agent plays 200 turns against the store and a provider that validates and counts.

Each configuration (tests.support.agentloop.matrix.TEST_MATRIX) is a server
process on SQLite or PostgreSQL, a provider format, a real window of 16k to
1M tokens, a provider that counts 0.8-1.4x the store's tokenizer, the offline
summariser or a model's, a learned window or a busy machine. The agent only
appends, asks for views and reports overflows; on every request the store must
keep its promises: no intervention, a view within its budget whose delta
assembles to the recorded hash, a request the provider accepts, the turn in
progress visible, a log's last line shown, at most one overflow (the one that
teaches the window), and every fact the user stated still in the final prompt.
The full matrix runs in ``make bench`` (group ``agentloop``).

A shorter session mixes what the provider counts at different rates: prose,
then a burst of parallel tool results it counts at three times the rate, near
the window; the view after it must not overflow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agentloop.matrix import K32, TEST_MATRIX, Config, run
from tests.support.agentloop.script import burst_script


@pytest.mark.timeout(600)
@pytest.mark.parametrize("config", TEST_MATRIX, ids=lambda c: c.name)
def test_an_agent_is_never_stranded(
    config: Config, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if config.database == "postgres":
        database_url = str(request.getfixturevalue("postgres_schema_url"))
    else:
        database_url = f"sqlite:///{tmp_path / 'store.db'}"

    outcome = run(config, database_url, tmp_path)

    assert outcome.violations() == [], outcome.figures()
    # The run went where the promises are tested: windows below the session's size
    # compacted, a model summariser was called, a learned window was learned once.
    if config.window <= 131_072:
        assert outcome.compactions, "nothing was compacted: the run proved nothing"
    if config.summarizer == "llm":
        assert outcome.summarizer_requests > 0
        assert any(c.summarizer_model.endswith("summarizer-model") for c in outcome.compactions)
    if config.learn_window:
        assert outcome.run.overflows == 1
    assert outcome.said, "the script planted no facts"


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("provider_format", "database"), [("openai", "sqlite"), ("anthropic", "postgres")]
)
def test_a_burst_the_provider_counts_higher_overflows_nothing(
    provider_format: str, database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Turns of prose teach a calibration near 1; then the model calls four tools at
    once, and their JSON, counted at 3x, brings the view to ~30,500 of the 32k window
    (accepted: nothing had taught the store that rate). That view's usage is the first
    lesson of the new mix, and the next view (the same and a 2,000-token message) must
    be counted by it: at a figure halfway between the two rates it passed within the
    budget, and the provider counted ~32,500 and refused it."""
    if database == "postgres":
        database_url = str(request.getfixturevalue("postgres_schema_url"))
    else:
        database_url = f"sqlite:///{tmp_path / 'store.db'}"
    plan = burst_script(
        before=6,
        prose_chars=9_000,
        burst_calls=4,
        burst_chars=3_000,
        after=2,
        after_chars=10_000,
        call_id_prefix="toolu" if provider_format == "anthropic" else "call",
    )
    config = Config(provider_format, K32, 1.0, database, result_ratio=3.0, turns=len(plan.turns))

    outcome = run(config, database_url, tmp_path, plan=plan)

    assert outcome.violations() == [], outcome.figures()
    counted = [r.tokens for r in outcome.requests]
    assert outcome.run.overflows == 0, counted
    # The run went where the rule matters: the burst came near the window, and taught a
    # rate far above the prose's. Not the final view's: whether the threshold compaction
    # the burst starts keeps it depends on whether the next user message lands before
    # the cut is planned, and once the burst is summarised the rate comes down again.
    assert max(counted) > 0.9 * K32, counted
    calibrations = [v.calibration for v in outcome.run.views]
    assert max(calibrations) > 1.5, calibrations
