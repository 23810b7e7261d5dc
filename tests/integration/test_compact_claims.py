"""A Compact call takes the session's claim before its chain asks a model, as the
compactions the store starts do: on PostgreSQL, while another server holds it, the
call asks no model and is refused, to retry once that one landed.

Each application below stands for one server on the test's store; the claim another
server holds is taken by the test through that server's own claims.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from domain.errors import CompactionRunningElsewhere
from domain.settings import SessionSettings
from services.bootstrap import Application, build_application
from services.config import Config
from services.engine.base import CompactionOutcome
from tests.support.fake_provider import FakeProvider
from tests.support.waiting import eventually
from tests.unit.support import assistant, user

Servers = Callable[..., Application]


@pytest.fixture
def servers(postgres_schema_url: str) -> Iterator[Servers]:
    """Starts one more server's application on the test's schema."""
    apps: list[Application] = []

    def server(**settings: object) -> Application:
        app = build_application(Config(database_url=postgres_schema_url, **settings))  # type: ignore[arg-type]
        apps.append(app)
        return app

    yield server
    for app in apps:
        app.close()


def summarised_by(provider: FakeProvider) -> Callable[[SessionSettings], SessionSettings]:
    """Settings whose chain asks the loopback model first."""

    def choose(settings: SessionSettings) -> SessionSettings:
        compaction = replace(
            settings.compaction,
            keep_recent_tokens=1_000,
            summarizer_model="openai/fake-summarizer",
            summarizer_api_base=provider.openai_base,
            summarizer_window_tokens=128_000,
        )
        return replace(settings, model="gpt-4o", compaction=compaction)

    return choose


def with_turns(app: Application, session_id: str, choose: Callable[..., SessionSettings]) -> None:
    app.sessions.create_session(session_id, choose)
    more_turns(app, session_id, range(4))


def more_turns(app: Application, session_id: str, numbers: range) -> None:
    for n in numbers:
        app.sessions.append(session_id, [user(f"question {n}: " + "why? " * 600)])
        app.sessions.append(session_id, [assistant(f"answer {n}: " + "because. " * 600)])


def compact(
    app: Application, session_id: str, key: str = "", *, dry_run: bool = False
) -> CompactionOutcome:
    return app.context.compact(
        session_id, instructions="", force=True, dry_run=dry_run, idempotency_key=key
    )


@contextmanager
def claimed_by(app: Application, session_id: str) -> Iterator[None]:
    """The session's claim, held by ``app``'s server for the block."""
    assert app.claims is not None
    with app.claims.hold(session_id) as held:
        assert held
        yield


def test_a_compact_while_another_server_summarises_asks_no_model(
    servers: Servers, provider: FakeProvider
) -> None:
    summarising, other = servers(), servers()
    with_turns(other, "s-1", summarised_by(provider))
    with claimed_by(summarising, "s-1"):
        with pytest.raises(CompactionRunningElsewhere) as refused:
            compact(other, "s-1", "c-1")
        assert refused.value.metadata == {"idempotency_key": "c-1"}
        assert not provider.requests
        # A dry run asks no model: it needs no claim, and answers its plan.
        planned = compact(other, "s-1", dry_run=True)
        assert planned.plan["summarizer_model"] == "openai/fake-summarizer"
    done = compact(other, "s-1", "c-1")
    assert done.compacted and not done.replayed
    assert len(provider.requests) == 1


def test_the_claim_is_decided_on_settings_another_server_changed(
    servers: Servers, provider: FakeProvider
) -> None:
    """The server that wrote the session last holds it with no summariser model; another
    server set one since. A Compact on the first asks that model (its chain reads the
    settings as stored), so it claims the session first."""
    writer, changer = servers(), servers()
    with_turns(writer, "s-1", lambda settings: settings)
    changer.sessions.update_settings("s-1", summarised_by(provider), None)
    with claimed_by(changer, "s-1"), pytest.raises(CompactionRunningElsewhere):
        compact(writer, "s-1", "c-1")
    assert not provider.requests


def test_a_try_that_claims_after_its_first_try_landed_asks_no_model(
    servers: Servers, provider: FakeProvider
) -> None:
    """A retry looked for its key before the first try landed on another server, and
    claimed the session after: under the claim it finds the first's compaction, and
    answers it without asking a model for a second summary."""
    first, retrying = servers(), servers(compaction_workers=1)
    with_turns(first, "s-1", summarised_by(provider))
    answers: list[CompactionOutcome] = []
    # The retrying server's one claim connection is busy: its try waits for it.
    with claimed_by(retrying, "another session"):
        retry = threading.Thread(target=lambda: answers.append(compact(retrying, "s-1", "c-1")))
        retry.start()
        # Its compaction job runs: the key was looked for, and found nothing.
        assert eventually(lambda: retrying.runner.running("s-1") is not None, within=10)
        landed = compact(first, "s-1", "c-1")
        assert landed.compacted and len(provider.requests) == 1
        more_turns(first, "s-1", range(4, 8))  # a second summary would have work
    retry.join(timeout=30)
    (answer,) = answers
    assert answer.replayed and answer.recorded == landed.recorded
    assert len(provider.requests) == 1, "the retry paid for a second summary"
