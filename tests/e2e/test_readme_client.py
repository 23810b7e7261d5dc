"""The README's Python snippets (the client and each runtime's adapter) run as written,
against a running store and the loopback provider standing in for OpenAI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from agents.models import openai_provider

from services.grpc.server import RunningServer
from tests.support.fake_provider import FakeProvider

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## From Python, and from the runtimes agents are built on"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def snippets() -> list[tuple[int, str]]:
    """(line, code) of each Python block of the section."""
    text = README.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return [
        (text.count("\n", 0, start + m.start()) + 2, m.group(1))
        for m in BLOCK.finditer(text, start, end)
    ]


def test_the_section_shows_the_client_and_each_runtime() -> None:
    imports = " ".join(code for _, code in snippets())
    for module in ("agents", "langgraph", "adk", "litellm"):
        assert f"sessionstore_client.{module} import" in imports
    assert "from sessionstore_client import Client" in imports


def test_the_readme_snippets_run_as_written(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeProvider() as provider:
        monkeypatch.setenv("SESSIONSTORE_ADDRESS", f"127.0.0.1:{server.port}")
        for variable in ("OPENAI_BASE_URL", "OPENAI_API_BASE"):
            monkeypatch.setenv(variable, provider.openai_base)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
        # Each snippet is a program of its own, as a reader runs it: the Agents SDK
        # keeps one HTTP pool for the process, whose connections would belong to
        # an earlier run's event loop, closed since ("Event loop is closed").
        monkeypatch.setattr(openai_provider, "_http_client", None)
        for line, code in snippets():
            exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__main__"})
            printed = capsys.readouterr().out
            assert printed.strip(), f"the snippet at README.md:{line} printed nothing"
        paths = {r.path for r in provider.requests}
    assert {"/v1/responses", "/v1/chat/completions"} <= paths  # the SDK's and litellm's calls
