"""The context window a session's prompts must fit, and where it comes from.

Resolved highest source first: the session's own setting, the server's models
config, the model's metadata, then a default (SPEC 3.1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from domain.settings import SessionSettings

DEFAULT_CONTEXT_WINDOW = 200_000


def resolve_context_window(
    settings: SessionSettings,
    models_config: Mapping[str, int],
    model_metadata: Callable[[str], int | None],
) -> tuple[int, str]:
    """The window in tokens and where it came from, highest source first.

    session setting -> models config -> model metadata -> default.
    """
    if settings.context_window_tokens > 0:
        return settings.context_window_tokens, "session"
    if settings.model in models_config:
        return models_config[settings.model], "modelsConfig"
    if settings.model:
        tokens = model_metadata(settings.model)
        if tokens:
            return tokens, "model"
    return DEFAULT_CONTEXT_WINDOW, "default"
