"""Third-party context engines plug in by entry point, and sessions choose them by name."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from domain.errors import InvalidSettings
from services.adapters.summarizers import build_summarizer
from services.app.sessions import AsOf
from services.bootstrap import build_application
from services.config import Config
from services.engine.base import EngineContext
from services.engine.registry import EngineRegistry
from services.engine.runner import CompactionRunner
from tests.unit.support import user

ENGINE_MODULE = '''
from services.engine.sliding_window import SlidingWindowEngine


class KeepEverything(SlidingWindowEngine):
    """A plug-in engine: the sliding window under another name."""
'''


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[None]:
    """A package installed the way pip leaves one: its module and a dist-info with entry points."""
    (tmp_path / "keep_everything_engine.py").write_text(ENGINE_MODULE)
    dist = tmp_path / "keep_everything_engine-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: keep-everything-engine\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[sessionstore.context_engines]\nkeep-everything = keep_everything_engine:KeepEverything\n"
    )
    sys.path.insert(0, str(tmp_path))
    yield
    sys.path.remove(str(tmp_path))
    sys.modules.pop("keep_everything_engine", None)


def test_an_engine_registered_by_entry_point_serves_sessions(installed_plugin: None) -> None:
    app = build_application(Config(database_url="memory:"))
    try:
        app.sessions.create_session("s-1", lambda s: replace(s, engine="keep-everything"))
        app.sessions.append("s-1", [user("hello")])
        served = app.context.prompt_view("s-1", AsOf(), "openai", deadline=None)
        assert served.engine == "keep-everything"
        assert served.view.log.entries[0].content[0].text == "hello"  # type: ignore[union-attr]
    finally:
        app.close()


def test_the_built_in_engines_and_an_unknown_name() -> None:
    runner = CompactionRunner(1)
    registry = EngineRegistry(
        EngineContext(port=None, summarizers=lambda p: build_summarizer(""), runner=runner)  # type: ignore[arg-type]
    )
    assert {"layered", "sliding-window"} <= set(registry.names)
    assert registry.get("layered").info.owns_compaction
    with pytest.raises(InvalidSettings, match="layered"):
        registry.get("no-such-engine")
    runner.close()
