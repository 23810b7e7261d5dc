"""The CLI stays in modules a reader can take in whole, each saying what it is for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import services.cli

MODULES = sorted(Path(services.cli.__file__).parent.glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_each_cli_module_is_short_and_says_what_it_is_for(path: Path) -> None:
    source = path.read_text()

    assert len(source.splitlines()) <= 400
    assert ast.get_docstring(ast.parse(source))


def test_the_cli_is_split_by_command_group() -> None:
    assert {p.stem for p in MODULES} >= {"__init__", "client", "output", "sessions", "views"}
