"""What this server allows a session's settings: its engines, providers and limits."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace

from domain.context.chain import provider_names, summarizer_chain
from domain.context.window import resolve_context_window
from domain.errors import InvalidSettings, quoted
from domain.settings import SessionSettings
from services.adapters.litellm_loader import load_in_background
from services.adapters.model_info import model_metadata
from services.adapters.providers import load_providers
from services.config import Config

MESSAGE_ENVELOPE_BYTES = 64 << 10


class SessionRules:
    def __init__(self, config: Config, engine_names: Collection[str] = ()) -> None:
        self.config = config
        # The context engines sessions may choose (all names, when empty).
        self.engine_names = set(engine_names)

    def check(self, settings: SessionSettings) -> None:
        """Refuses settings naming an engine or a summariser provider this server lacks."""
        if self.engine_names and settings.engine not in self.engine_names:
            raise InvalidSettings(
                f"engine {quoted(settings.engine)} is not installed on this server; choose one of "
                + ", ".join(sorted(self.engine_names))
            )
        load_providers(self.config.providers_file).check(provider_names(settings.compaction))
        if any(step.is_model for step in summarizer_chain(settings.compaction, settings.model)):
            load_in_background()

    @property
    def max_content_bytes(self) -> int:
        """The most content one message may carry, with room for its other fields: an
        entry in a request, a prompt view in an answer."""
        return (self.config.max_message_mb << 20) - MESSAGE_ENVELOPE_BYTES

    def context_window(self, settings: SessionSettings) -> tuple[int, str]:
        return resolve_context_window(
            settings, self.config.model_windows, model_metadata.context_window
        )

    def new_settings(self, choose: Callable[[SessionSettings], SessionSettings]) -> SessionSettings:
        """The server's defaults changed by ``choose``, checked, with the model set."""
        settings = choose(self.config.new_session_settings())
        self.check(settings)
        return replace(settings, model=settings.model or self.config.default_model)
