"""Context engines by name: the built-in two, and any a package registers.

A third-party engine is a factory (EngineContext -> ContextEngine) registered
under the ``sessionstore.context_engines`` entry-point group, e.g. in its
pyproject.toml::

    [project.entry-points."sessionstore.context_engines"]
    retrieval = "my_package.engine:RetrievalEngine"

Sessions choose one with the ``engine`` setting; the server's default comes
from SESSIONSTORE_SESSION_DEFAULTS.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

from domain.errors import InvalidSettings, quoted
from services.engine.base import ContextEngine, EngineContext, EngineFactory
from services.engine.layered import LayeredEngine
from services.engine.sliding_window import SlidingWindowEngine

ENTRY_POINT_GROUP = "sessionstore.context_engines"
BUILT_IN: dict[str, EngineFactory] = {
    "layered": LayeredEngine,
    "sliding-window": SlidingWindowEngine,
}


def installed_engines() -> dict[str, EngineFactory]:
    """The engines' factories by name: the built-in ones and those packages register."""
    factories = dict(BUILT_IN)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        factories.setdefault(point.name, point.load())
    return factories


class EngineRegistry:
    """Builds each engine once, on first use, with the same context."""

    def __init__(
        self,
        context: EngineContext,
        factories: dict[str, EngineFactory] | None = None,
        wrap: Callable[[ContextEngine], ContextEngine] = lambda engine: engine,
    ) -> None:
        self._context = context
        self._factories = installed_engines() if factories is None else dict(factories)
        # Laid around each engine built (the tracing of its decisions).
        self._wrap = wrap
        self._engines: dict[str, ContextEngine] = {}

    @property
    def names(self) -> list[str]:
        return sorted(self._factories)

    def get(self, name: str) -> ContextEngine:
        engine = self._engines.get(name)
        if engine is None:
            factory = self._factories.get(name)
            if factory is None:
                raise InvalidSettings(
                    f"engine {quoted(name)} is not installed; this server has "
                    f"{', '.join(self.names)}"
                )
            engine = self._engines[name] = self._wrap(factory(self._context))
        return engine
