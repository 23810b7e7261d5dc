"""The README's Configuration table names every variable the server reads."""

from __future__ import annotations

from pathlib import Path

from services.config import Config

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_configuration_table_names_every_server_variable() -> None:
    text = README.read_text()
    start = text.index("\n## Configuration\n")
    section = text[start : text.index("\n## ", start + 1)]
    rows = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    variables = [f"SESSIONSTORE_{name.upper()}" for name in Config.model_fields]
    assert [v for v in variables if f"`{v}`" not in rows] == []
