"""The README's Python snippets (the client and each runtime's adapter) run as written,
against a running store and the loopback provider standing in for OpenAI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from agents.models import openai_provider

from services.grpc.server import RunningServer
from tests.support.fake_provider import FakeProvider

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SECTION = "## From Python, and from the runtimes agents are built on"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def snippets() -> list[tuple[int, str]]:
    """(line, code) of each Python block of the section."""
    text = README.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return [
        (text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text, start, end)
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


# Runs a snippet's imports where only the given distributions can be imported, as
# in a fresh environment where pip installed the client with one extra: a module
# that only other installed distributions provide is not found.
ONLY_THESE_DISTRIBUTIONS = """
import importlib.abc, importlib.metadata, json, re, sys

allowed = set(json.loads(sys.argv[1]))
providers: dict[str, set[str]] = {}
for dist in importlib.metadata.distributions():
    name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
    for file in dist.files or ():
        parts = file.parts
        if parts[0] == ".." or not parts[-1].endswith((".py", ".so")):
            continue
        module = [*parts[:-1], parts[-1].split(".")[0]]
        if module[-1] == "__init__":
            module.pop()
        providers.setdefault(".".join(module), set()).add(name)


class Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname in providers and not providers[fullname] & allowed:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


sys.meta_path.insert(0, Hidden())
exec(sys.stdin.read())
"""


def _closure(requirements: list[str], extras: frozenset[str] = frozenset()) -> set[str]:
    """The distributions the requirements install, transitively (from the metadata
    of this environment, where all of them are installed)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [(r, extras) for r in requirements]
    while pending:
        text, wanted = pending.pop()
        requirement = Requirement(text)
        environments = [{"extra": e} for e in wanted or {""}]
        if requirement.marker and not any(requirement.marker.evaluate(e) for e in environments):
            continue
        # A distribution asked for with other extras brings more.
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        requires = metadata.distribution(key[0]).requires or []
        pending += [(r, key[1]) for r in requires]
    return {name for name, _ in seen}


def _adapter(code: str) -> str:
    """The adapter module a snippet shows (client: none)."""
    found = re.search(r"sessionstore_client\.(\w+) import", code)
    return found.group(1) if found else "client"


@pytest.mark.parametrize("line,code", snippets(), ids=[_adapter(c) for _, c in snippets()])
def test_each_snippet_imports_what_its_extra_installs(line: int, code: str) -> None:
    project = tomllib.loads((ROOT / "clients/python/pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    extra = _adapter(code) if _adapter(code) in extras else None
    installed = _closure(project["dependencies"] + (extras[extra] if extra else []))
    imports = "\n".join(
        statement for statement in code.splitlines() if statement.startswith(("import ", "from "))
    )
    ran = subprocess.run(
        [sys.executable, "-c", ONLY_THESE_DISTRIBUTIONS, json.dumps(sorted(installed))],
        input=imports,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, f"README.md:{line} with [{extra}] only: {ran.stderr}"
