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
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agentloop.matrix import TEST_MATRIX, Config, run


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
