"""Python source as text: the pieces every generated module is made of."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .paths import PROTO

HEADER = (
    f"# Generated from {PROTO} by clients/python/tools/generate.py.\n"
    "# DO NOT EDIT: `make proto` writes it.\n"
)


def module_text(lines: Iterable[str]) -> str:
    """A module's text from its lines: no trailing blank lines, one final newline."""
    return "\n".join(lines).rstrip() + "\n"


def docstring(text: str, indent: str) -> list[str]:
    """TEXT as a docstring's lines; none when TEXT is empty."""
    if not text:
        return []
    body = text.replace("\\", "\\\\").replace('"""', "'''")
    lines = body.splitlines()
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [
        f'{indent}"""{lines[0]}',
        *(f"{indent}{line}".rstrip() for line in lines[1:]),
        f'{indent}"""',
    ]


def comment(text: str, indent: str) -> list[str]:
    """TEXT as ``#:`` comments, which document the attribute below them."""
    return [f"{indent}#: {line}".rstrip() for line in text.splitlines()]


def imports(module: str, names: Iterable[str]) -> list[str]:
    """One import statement, its names in isort's order (ruff format wraps it)."""
    return [f"from {module} import {', '.join(sorted(names, key=lambda n: (n.lower(), n)))}"]


def dunder_all(names: Iterable[str]) -> str:
    """The module's ``__all__``, sorted (ruff format wraps it)."""
    quoted = ", ".join(f'"{name}"' for name in sorted(names))
    return f"__all__ = [{quoted}]"


def words(text: str) -> set[str]:
    """The names in a piece of source: the ones its module must import."""
    return set(re.findall(r"\w+", text))


def snake(name: str) -> str:
    """append_entries for AppendEntries."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def camel(name: str) -> str:
    """ContextManagement for context_management."""
    return "".join(part.capitalize() for part in name.split("_"))
