"""Summarisers against a provider on loopback speaking OpenAI's and Anthropic's protocols.

litellm runs for real: its HTTP clients, its request building and its error
mapping. Only the provider is ours, and it answers with the providers' own
bodies, so what passes here is what litellm would do against the real APIs.
"""

from __future__ import annotations

import itertools
import socket
import time
from pathlib import Path

import pytest

from domain.content import Entry
from domain.context.budget import context_budget
from domain.context.chain import SummarizerStep
from domain.context.compaction_planner import CompactionPlan, plan_compaction
from domain.context.summary import SECTIONS, parse_summary, prompt_hash
from domain.errors import InvalidSettings
from domain.settings import CompactionPolicy
from services.adapters.providers import load_providers
from services.adapters.summarizers import (
    NO_KEY,
    LiteLLMSummarizer,
    OfflineSummarizer,
    SummarizerError,
    SummarizerOverflow,
    SummarizerUnavailable,
    build_summarizer,
)
from services.adapters.summarizers.base import SummaryRequest
from services.engine.staged_summary import CompactionStepFailed, summarize_plan
from tests.support.fake_provider import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    FakeProvider,
    default_summary,
    delay,
    fail,
    reply,
)
from tests.unit.support import assistant, call, tool, user

KEY = "sk-test-not-a-real-key"


def openai(provider: FakeProvider, window: int | None = None) -> LiteLLMSummarizer:
    return LiteLLMSummarizer(
        "openai/gpt-4o-mini", api_base=provider.openai_base, api_key=KEY, window_tokens=window
    )


def anthropic(provider: FakeProvider, window: int | None = None) -> LiteLLMSummarizer:
    return LiteLLMSummarizer(
        "anthropic/claude-haiku-4-5", api_base=provider.url, api_key=KEY, window_tokens=window
    )


PROTOCOLS = {"openai": (openai, OPENAI_PATH), "anthropic": (anthropic, ANTHROPIC_PATH)}


def _turn(i: int, chars: int = 4_000) -> list[Entry]:
    """A user request, a tool call and its result: ``chars`` characters of output."""
    output = (f"line {i}: src/module_{i}.py ok\n" * (chars // 28 + 1))[:chars]
    return [
        user(f"step {i}: check src/module_{i}.py", id=f"u{i}", tokens=10),
        assistant(
            f"Reading module {i}.",
            id=f"a{i}",
            calls=[call(f"c{i}", "read", f'{{"path": "src/module_{i}.py"}}')],
            tokens=20,
        ),
        tool(f"c{i}", output, id=f"t{i}", tokens=chars // 4),
    ]


def _history(turns: int, chars: int = 4_000) -> list[Entry]:
    return [e for i in range(turns) for e in _turn(i, chars)]


def _plan(entries: list[Entry], summariser_window: int) -> CompactionPlan:
    plan = plan_compaction(
        entries,
        context_budget(200_000, CompactionPolicy(keep_recent_tokens=2_000)),
        summariser_window_tokens=summariser_window,
    )
    assert isinstance(plan, CompactionPlan), plan
    return plan


# -- one call --------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_model_summarises_over_the_providers_protocol(
    provider: FakeProvider, protocol: str
) -> None:
    make, path = PROTOCOLS[protocol]
    entries = _turn(1, 400)
    summary = make(provider).summarize(
        SummaryRequest(entries, previous_summary="## Goal\n- earlier goal")
    )

    assert summary.text.startswith("## Goal\n- step 1: check src/module_1.py")
    assert summary.model in ("gpt-4o-mini", "claude-haiku-4-5")
    assert summary.input_tokens == provider.requests[0].estimated_tokens
    assert summary.output_tokens and summary.output_tokens > 0
    (request,) = provider.requests
    assert request.path == path
    assert request.body["max_tokens"] == 4_096
    assert "<previous-summary>\n## Goal\n- earlier goal" in request.text()
    if protocol == "anthropic":
        assert request.headers.get("x-api-key") == KEY
        assert "You compact the history" in str(request.body["system"])
    else:
        assert request.headers.get("authorization") == f"Bearer {KEY}"
        assert request.messages[0]["role"] == "system"


def test_model_and_offline_receipts_hash_the_same_prompt(provider: FakeProvider) -> None:
    entries = _turn(2, 400)
    notes = ("[Large tool (~60K tokens) omitted from summary]",)
    model = openai(provider).summarize(SummaryRequest(entries, notes=notes))
    offline = OfflineSummarizer().summarize(SummaryRequest(entries, notes=notes))
    expected = SummaryRequest(
        entries,
        previous_summary="",
        instructions="",
        identifier_policy="preserve",
        identifier_instructions="",
        notes=notes,
    )
    assert model.prompt_hash == offline.prompt_hash == prompt_hash(expected.prompt())
    # The model was told to keep the note; it is kept even though this one did not.
    assert notes[0] in model.text and notes[0] in offline.text


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_what_the_user_said_is_asked_for_and_put_back_when_the_model_drops_it(
    provider: FakeProvider, protocol: str
) -> None:
    make, _ = PROTOCOLS[protocol]
    entries = [
        user(
            'Deploy INC-48213 fails after 420 ms with "psql: error: connection refused". '
            "Never deploy on Fridays.",
            id="u1",
        ),
        *_turn(1, 400),
    ]
    previous = "## Constraints\n- User instruction (entry u0): Remember the rota."
    forgetful = "## Goal\n- Fix the deploy.\n\n## Critical Context\n- (none)\n"
    provider.script(reply(forgetful))
    summary = make(provider).summarize(SummaryRequest(entries, previous_summary=previous))

    (request,) = provider.requests
    asked = request.text()
    assert "User instruction (entry <id>)" in asked
    assert "Named by the user" in asked
    assert "numbers with their units (420 ms" in asked
    sections = parse_summary(summary.text)
    assert sections["Goal"] == ["Fix the deploy."]
    assert sections["Constraints"] == [
        "User instruction (entry u0): Remember the rota.",
        "User instruction (entry u1): Never deploy on Fridays.",
    ]
    assert sections["Critical Context"] == [
        "Named by the user: `INC-48213`, `420 ms`, `src/module_1.py`",
        "Error reported by the user (entry u1): psql: error: connection refused",
    ]


def test_keys_come_from_the_environment_as_litellm_reads_them(
    provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    summarizer = LiteLLMSummarizer("anthropic/claude-haiku-4-5", api_base=provider.url)
    summarizer.summarize(SummaryRequest(_turn(1, 100)))
    assert provider.requests[0].headers.get("x-api-key") == "sk-ant-from-env"


ERRORS = [
    ("openai", "overflow", SummarizerOverflow, 400),
    ("openai", "rate_limit", SummarizerUnavailable, 429),
    ("openai", "server_error", SummarizerUnavailable, 500),
    ("openai", "auth", SummarizerError, 401),
    ("anthropic", "overflow", SummarizerOverflow, 400),
    ("anthropic", "rate_limit", SummarizerUnavailable, 429),
    ("anthropic", "overloaded", SummarizerUnavailable, 529),
    ("anthropic", "server_error", SummarizerUnavailable, 500),
    ("anthropic", "auth", SummarizerError, 401),
]


@pytest.mark.parametrize(("protocol", "error", "typed", "status"), ERRORS)
def test_provider_errors_become_typed_failures(
    provider: FakeProvider,
    protocol: str,
    error: str,
    typed: type[SummarizerError],
    status: int | None,
) -> None:
    make, _ = PROTOCOLS[protocol]
    provider.script(fail(error))
    with pytest.raises(SummarizerError) as raised:
        make(provider).summarize(SummaryRequest(_turn(1, 100)))
    assert type(raised.value) is typed
    if status is not None:
        assert raised.value.status_code == status
    assert raised.value.provider == protocol
    assert raised.value.message


def test_a_slow_provider_times_out_as_unavailable(provider: FakeProvider) -> None:
    provider.script(delay(10))
    started = time.monotonic()
    with pytest.raises(SummarizerUnavailable):
        openai(provider).summarize(SummaryRequest(_turn(1, 100), timeout_seconds=0.5))
    assert time.monotonic() - started < 5


def test_no_server_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    summarizer = LiteLLMSummarizer(
        "openai/gpt-4o-mini", api_base=f"http://127.0.0.1:{port}/v1", api_key=KEY
    )
    with pytest.raises(SummarizerUnavailable):
        summarizer.summarize(SummaryRequest(_turn(1, 100), timeout_seconds=5))


def test_the_configured_model_picks_the_summariser() -> None:
    assert isinstance(build_summarizer(SummarizerStep("offline", "offline")), OfflineSummarizer)
    known = build_summarizer(SummarizerStep("openai/gpt-4o-mini", "openai/gpt-4o-mini"))
    assert isinstance(known, LiteLLMSummarizer)
    assert known.window_tokens == 128_000  # from litellm's model map
    local = build_summarizer(
        SummarizerStep(
            "openai/my-local-model",
            "openai/my-local-model",
            api_base="http://127.0.0.1:1/v1",
            window_tokens=8_192,
        )
    )
    assert isinstance(local, LiteLLMSummarizer)
    assert (local.window_tokens, local.api_base) == (8_192, "http://127.0.0.1:1/v1")


def test_a_providers_file_names_where_a_model_is_served_and_with_which_key(
    provider: FakeProvider, tmp_path: Path
) -> None:
    """The key comes from a secret file the providers file names; the session names only
    the provider. A provider with no key (a local server) needs no OPENAI_API_KEY."""
    secret = tmp_path / "key"
    secret.write_text("sk-from-a-secret-file\n")
    providers_file = tmp_path / "providers.toml"
    providers_file.write_text(
        f'[hosted]\napi_base = "{provider.openai_base}"\napi_key_file = "{secret}"\n'
        "window_tokens = 64000\n\n"
        f'[local]\napi_base = "{provider.openai_base}"\n'
    )
    providers = load_providers(providers_file)
    hosted = build_summarizer(
        SummarizerStep("openai/qwen@hosted", "openai/qwen", "hosted"), providers
    )
    assert hosted.window_tokens == 64_000
    hosted.summarize(SummaryRequest(_turn(1, 100)))
    assert provider.requests[-1].headers["authorization"] == "Bearer sk-from-a-secret-file"
    local = build_summarizer(SummarizerStep("openai/qwen@local", "openai/qwen", "local"), providers)
    local.summarize(SummaryRequest(_turn(2, 100)))
    assert provider.requests[-1].headers["authorization"] == f"Bearer {NO_KEY}"
    with pytest.raises(InvalidSettings, match="not in this server's providers file"):
        providers.check({"elsewhere"})


# -- a whole plan ------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_no_call_exceeds_the_summarisers_window(protocol: str) -> None:
    """About 500,000 tokens planned for a 128k summariser that refuses anything larger."""
    make, _ = PROTOCOLS[protocol]
    entries = _history(60, 32_000)
    plan = _plan(entries, 128_000)
    assert len(plan.chunks) >= 5
    with FakeProvider(window_tokens=128_000) as provider:
        staged = summarize_plan(
            plan,
            {e.id: e for e in entries},
            make(provider, 128_000),
            previous_summary="",
            instructions="",
            identifier_policy="preserve",
        )
        requests = provider.requests
    assert [r.refused for r in requests] == [""] * len(requests)
    assert all(r.estimated_tokens + r.body["max_tokens"] <= 128_000 for r in requests)
    assert staged.stage == "full"
    assert staged.calls == len(requests) == len(plan.chunks) == staged.chunks_summarised
    assert len(staged.prompt_hashes) == staged.calls
    assert staged.input_tokens == sum(r.estimated_tokens for r in requests)
    # Rolling: each call carries the summary the previous one returned, with the paths
    # the user named (which the model left out) put back.
    for before, after in itertools.pairwise(requests):
        answer = default_summary(before.body).splitlines()
        carried = after.text().split("<previous-summary>\n", 1)[1]
        carried = carried.split("\n</previous-summary>", 1)[0].splitlines()
        written = [line for line in answer if line != "- (none)"]
        assert written == [line for line in carried if line in written]
        assert any(line.startswith("- Named by the user: `src/module_") for line in carried)
    assert staged.text.startswith("## Goal")


def test_a_chunk_the_model_rejects_is_split_in_halves(provider: FakeProvider) -> None:
    entries = _history(12, 4_000)
    plan = _plan(entries, 32_000)
    provider.script(fail("overflow"))
    staged = summarize_plan(
        plan,
        {e.id: e for e in entries},
        anthropic(provider, 32_000),
        previous_summary="",
        instructions="",
        identifier_policy="preserve",
    )
    assert staged.stage == "split"
    assert staged.failed_calls == 1
    assert staged.calls == len(plan.chunks) + 1
    first_chunk = plan.chunks[0].entry_ids
    halves = [r.text().count("<entry id=") for r in provider.requests[1:3]]
    assert halves == [len(first_chunk) // 2, len(first_chunk) - len(first_chunk) // 2]


def test_a_single_huge_result_is_clipped_to_fit(provider: FakeProvider) -> None:
    """The planner counted the output small (a stale count); the request is still never
    sent too large: its tool result is clipped to fit the window."""
    huge = tool("big", "x" * 200_000, id="big-t", tokens=100)
    entries = [user("read it", id="big-u"), assistant(id="big-a", calls=[call("big")]), huge]
    entries += _history(10, 4_000)
    plan = _plan(entries, 16_000)
    with FakeProvider(window_tokens=16_000) as limited:
        staged = summarize_plan(
            plan,
            {e.id: e for e in entries},
            openai(limited, 16_000),
            previous_summary="",
            instructions="",
            identifier_policy="preserve",
        )
        assert all(not r.refused for r in limited.requests)
        assert any("more chars in this entry]" in r.text() for r in limited.requests)
    assert staged.stage == "clipped"
    assert "split" in staged.fallbacks


def test_rate_limits_are_retried_then_succeed(provider: FakeProvider) -> None:
    entries = _history(12, 4_000)
    plan = _plan(entries, 128_000)
    provider.script(fail("rate_limit"), fail("server_error"))
    staged = summarize_plan(
        plan,
        {e.id: e for e in entries},
        openai(provider),
        previous_summary="",
        instructions="",
        identifier_policy="preserve",
        backoff_seconds=0.01,
    )
    assert (staged.calls, staged.failed_calls) == (1, 2)


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ([fail("overloaded")] * 3, "unavailable after 3 attempts"),
        ([fail("auth")], "invalid x-api-key"),
    ],
)
def test_a_failing_summariser_fails_the_step(
    provider: FakeProvider, script: list, reason: str
) -> None:
    entries = _history(12, 4_000)
    provider.script(*script)
    with pytest.raises(CompactionStepFailed) as failed:
        summarize_plan(
            _plan(entries, 128_000),
            {e.id: e for e in entries},
            anthropic(provider),
            previous_summary="",
            instructions="",
            identifier_policy="preserve",
            backoff_seconds=0.01,
        )
    assert failed.value.stage == "full"
    assert reason in failed.value.reason


def test_a_stuck_summariser_ends_at_the_timeout(provider: FakeProvider) -> None:
    entries = _history(12, 4_000)
    provider.script(delay(30))
    started = time.monotonic()
    with pytest.raises(CompactionStepFailed) as failed:
        summarize_plan(
            _plan(entries, 128_000),
            {e.id: e for e in entries},
            openai(provider),
            previous_summary="",
            instructions="",
            identifier_policy="preserve",
            timeout_seconds=1,
        )
    assert "timed out after 1 s" in failed.value.reason
    assert time.monotonic() - started < 5


def test_offline_summary_of_two_million_tokens_is_deterministic() -> None:
    entries = _history(500, 16_000)
    plan = _plan(entries, 128_000)
    assert plan.summarised_tokens > 1_990_000
    by_id = {e.id: e for e in entries}

    def run() -> tuple[str, str]:
        staged = summarize_plan(
            plan,
            by_id,
            OfflineSummarizer(window_tokens=128_000),
            previous_summary="",
            instructions="",
            identifier_policy="preserve",
        )
        assert staged.calls == len(plan.chunks) > 40
        assert staged.model == "offline"
        return staged.text, staged.prompt_hash

    first = run()
    assert first == run()
    text = first[0]
    for section in SECTIONS:
        assert f"## {section}" in text
    assert "src/module_0.py" in text
    assert len(text) <= 12_000
