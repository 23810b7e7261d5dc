"""The README's command-line walk-through, run exactly as written.

The first ```sh block of the section "A session from the command line" is read
line by line. Each `$ uv run sessionstore ARGS` line runs the CLI in process
with ARGS as the shell would split them (a trailing `# ...` is a comment),
against a fresh server; `--address` comes from SESSIONSTORE_ADDRESS, as it
would from the default. The lines after it, up to the next `$` line, are what
the terminal shows: stdout and stderr together, compared line for line.

The one allowance: the walk-through uses client-chosen ids, so everything is
deterministic but the times. The test runs in UTC at 100 columns, and each time
(`2026-11-22 03:29:25 UTC`) on either side reads as `<time>` before comparing.
A command whose shown output begins `error:` must fail; every other must succeed.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import structlog.testing
from click.testing import CliRunner

from services.cli import cli
from services.config import Config
from services.grpc.server import start

README = Path(__file__).parents[2] / "README.md"
SECTION = "## A session from the command line"
PROMPT = "$ uv run sessionstore "
TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


@dataclass
class Step:
    line: str
    shown: list[str] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.line.removeprefix(PROMPT), comments=True)


def walk_through() -> list[Step]:
    text = README.read_text()
    section = text[text.index(SECTION) :]
    section = section[: section.find("\n## ", len(SECTION))]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    steps: list[Step] = []
    for line in block.splitlines():
        if line.startswith("$"):
            assert line.startswith(PROMPT), f"not a sessionstore command: {line}"
            steps.append(Step(line))
        else:
            assert steps, f"output before any command: {line}"
            steps[-1].shown.append(line)
    return steps


@pytest.fixture
def address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    # Keep the in-process server's log lines out of the CLI's captured output.
    with structlog.testing.capture_logs():
        running = start(Config(address="127.0.0.1:0", database_url=f"sqlite:///{tmp_path}/s.db"))  # type: ignore[call-arg]
        yield f"127.0.0.1:{running.port}"
        running.stop(0)
    monkeypatch.undo()
    time.tzset()


def test_the_walk_through_has_commands_and_output() -> None:
    steps = walk_through()

    assert len(steps) >= 10
    assert any(step.shown and step.shown[0].startswith("error:") for step in steps)


def test_the_readme_walk_through_prints_what_it_shows(address: str) -> None:
    runner = CliRunner(env={"SESSIONSTORE_ADDRESS": address, "COLUMNS": "100"})
    for step in walk_through():
        result = runner.invoke(cli, step.argv, prog_name="sessionstore")

        printed = [TIME.sub("<time>", line) for line in result.output.splitlines()]
        shown = [TIME.sub("<time>", line) for line in step.shown]
        assert printed == shown, step.line
        failed = bool(shown) and shown[0].startswith("error:")
        assert (result.exit_code != 0) == failed, (step.line, result.output)
