"""Third-party context engines plug in by entry point, and sessions choose them by name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from domain.errors import InvalidSettings
from services.adapters.summarizers import build_summarizer
from services.adapters.summary_claims import OneServerClaims
from services.app.sessions import AsOf
from services.bootstrap import build_application
from services.config import Config
from services.engine.base import EngineContext
from services.engine.registry import EngineRegistry
from services.engine.runner import CompactionRunner
from tests.support.engine_plugins import installed_engine
from tests.unit.support import user

ENGINE_MODULE = '''
from services.engine.sliding_window import SlidingWindowEngine


class Engine(SlidingWindowEngine):
    """A plug-in engine: the sliding window under another name."""
'''


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[None]:
    with installed_engine(tmp_path, "keep-everything", "keep_everything_engine", ENGINE_MODULE):
        yield


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
        EngineContext(
            port=None,  # type: ignore[arg-type]
            summarizers=lambda p: build_summarizer(""),
            runner=runner,
            claims=OneServerClaims(),
        )
    )
    assert {"layered", "sliding-window"} <= set(registry.names)
    assert registry.get("layered").info.owns_compaction
    with pytest.raises(InvalidSettings, match="layered"):
        registry.get("no-such-engine")
    runner.close()
