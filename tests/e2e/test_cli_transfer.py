"""`sessionstore import` and `export` against an in-process server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.e2e.test_cli import address, ok, run
from tests.e2e.test_transfer import PI_SMALL, lines

__all__ = ["address"]


def test_import_then_export_a_pi_file(address: str, tmp_path: Path) -> None:
    session = f"cli-{uuid.uuid4().hex[:12]}"
    printed = ok(address, "import", str(PI_SMALL), "--id", session)
    assert printed.splitlines() == [
        f"imported {PI_SMALL.stat().st_size:,} bytes (pi)",
        f"{session}: version 9, 6 entries, 2 compactions, 0 abandoned tool calls",
    ]
    target = tmp_path / "out.jsonl"
    assert f"exported {session} to {target}" in ok(address, "export", session, "-o", str(target))
    exported = [json.loads(line) for line in target.read_text().splitlines()]
    assert exported[1:] == lines(PI_SMALL)[1:]

    first_turn = ok(address, "export", session, "--version", "5")
    assert [json.loads(line)["id"] for line in first_turn.splitlines()[1:]] == [
        r["id"] for r in lines(PI_SMALL)[1:5]
    ]
    answer = json.loads(ok(address, "--json", "import", str(target), "--id", session + "-2"))
    assert answer["sessions"][0]["session"]["version"] == 9


def test_a_bad_file_is_refused_with_its_line(address: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"session","version":3,"id":"x"}\n{"type":"message"\n')
    result = run(address, "import", str(bad), "--format", "pi")
    assert result.exit_code == 1
    assert "line 2: not valid JSON" in result.stderr
