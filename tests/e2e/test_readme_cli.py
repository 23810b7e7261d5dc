"""The README's command-line walk-throughs, run exactly as written.

The first ```sh block of the section "A session from the command line", and the
store-run compaction of "Context management" (the block that creates demo2), are
read line by line. Each `$ uv run sessionstore ARGS` line runs the CLI in process
with ARGS as the shell would split them (a trailing `# ...` is a comment, and
`< FILE` its standard input), against a fresh server; `--address` comes from
SESSIONSTORE_ADDRESS, as it would from the default. Any other `$` line runs in
bash, in the same (temporary) directory. The lines after it, up to the next `$`
line, are what the terminal shows: stdout and stderr together, compared line for
line.

The allowances: the walk-throughs use client-chosen ids, so everything is
deterministic but the times. The test runs in UTC at 100 columns, and each time
(`2026-11-22 03:29:25 UTC`) on either side reads as `<time>`, and each
compaction's duration (`duration      2 ms`) as `<ms>`, before comparing.
A command whose shown output begins `error:` must fail; every other must succeed.
"""

from __future__ import annotations

import re
import shlex
import subprocess
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
COMPACTION_SECTION = "## Context management"
COMPACTION_DEMO = "create --id demo2"
PROMPT = "$ uv run sessionstore "
TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
DURATION = re.compile(r"(duration +)[\d,]+ ms")


@dataclass
class Step:
    line: str
    shown: list[str] = field(default_factory=list)

    @property
    def in_shell(self) -> bool:
        return not self.line.startswith(PROMPT)

    @property
    def words(self) -> list[str]:
        return shlex.split(self.line.removeprefix(PROMPT), comments=True)

    @property
    def argv(self) -> list[str]:
        words = self.words
        return words[: words.index("<")] if "<" in words else words

    @property
    def stdin(self) -> str | None:
        words = self.words
        return Path(words[words.index("<") + 1]).read_text() if "<" in words else None


def walk_through(title: str = SECTION, holding: str = "") -> list[Step]:
    """The steps of the first ```sh block of section ``title`` that holds ``holding``."""
    text = README.read_text()
    section = text[text.index(title) :]
    section = section[: section.find("\n## ", len(title))]
    blocks = [b.split("```", 1)[0] for b in section.split("```sh\n")[1:]]
    block = next(b for b in blocks if holding in b)
    steps: list[Step] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append(Step(line))
        else:
            assert steps, f"output before any command: {line}"
            steps[-1].shown.append(line)
    return steps


def compaction_demo() -> list[Step]:
    return walk_through(COMPACTION_SECTION, COMPACTION_DEMO)


def comparable(lines: list[str]) -> list[str]:
    return [DURATION.sub(r"\1<ms>", TIME.sub("<time>", line)) for line in lines]


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
    assert not any(step.in_shell for step in steps), "only sessionstore commands"
    assert any(step.shown and step.shown[0].startswith("error:") for step in steps)


def test_the_compaction_demo_refuses_then_compacts() -> None:
    shown = [step.shown[0] for step in compaction_demo() if step.shown]

    assert any(line.startswith("dry run, would not compact") for line in shown)
    assert any(line.startswith("compacted at version") for line in shown)


def run_as_shown(address: str, steps: list[Step]) -> None:
    runner = CliRunner(env={"SESSIONSTORE_ADDRESS": address, "COLUMNS": "100"})
    for step in steps:
        if step.in_shell:
            ran = subprocess.run(
                ["bash", "-c", step.line.removeprefix("$ ")],
                capture_output=True,
                text=True,
                check=True,
            )
            assert comparable((ran.stdout + ran.stderr).splitlines()) == comparable(step.shown)
            continue
        result = runner.invoke(cli, step.argv, input=step.stdin, prog_name="sessionstore")

        printed = comparable(result.output.splitlines())
        assert printed == comparable(step.shown), step.line
        failed = bool(step.shown) and step.shown[0].startswith("error:")
        assert (result.exit_code != 0) == failed, (step.line, result.output)


def test_the_readme_walk_through_prints_what_it_shows(address: str) -> None:
    run_as_shown(address, walk_through())


def test_the_readme_compaction_demo_prints_what_it_shows(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where the demo writes its build log
    run_as_shown(address, compaction_demo())
