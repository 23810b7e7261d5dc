"""How a prompt view is kept within the limits of what carries it: the one message
gRPC sends (SESSIONSTORE_MAX_MESSAGE_MB) and the request size in bytes a provider's
refusal taught (HTTP 413). Either way the engine brings the view within by the means
it has for any budget (compaction, recorded and audited), asked for the share of the
view's tokens that the limit is of its bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from domain.context.budget import ContextBudget
from domain.context.request_bytes import over_request_bytes, tokens_within_bytes
from domain.context.window_guard import WindowVerdict
from domain.errors import PromptOverBudget, ViewOverMessageLimit
from projections.rendered_prompt import RenderedPrompt
from projections.session_history import PromptView
from services.engine.base import EngineAction

# A view over the message limit is brought within this share of it (its tokens'
# bytes vary, and the answer carries more than the rendering).
MESSAGE_FIT_SHARE = 0.9
# A view over a learned limit in bytes gets this many tries to come under it (a
# compaction's bytes per token differ from the view's average).
BYTE_FIT_ROUNDS = 2


@dataclass(frozen=True)
class ServedView:
    view: PromptView
    rendered: RenderedPrompt
    verdict: WindowVerdict
    budget: ContextBudget
    engine: str
    actions: tuple[EngineAction, ...] = field(default_factory=tuple)
    # Set when the client's view is still the beginning of this one: only the
    # messages appended since, as a JSON array, and the version they follow.
    appended_messages_json: str | None = None
    base_version: int = 0


def fitted_to_message(
    assemble: Callable[[int | None], tuple[ServedView, bool]],
    served: ServedView,
    size: int,
    limit: int,
    token_budget: int | None,
) -> tuple[ServedView, bool]:
    """A view no message can carry would strand the agent as surely as one over the
    window: the engine brings it within one message by the means it has for any
    budget (compaction, recorded and audited), asked for the share of the view's
    tokens that the limit is of its bytes. ``assemble(budget)`` makes a view."""
    tokens = served.budget.provider_tokens(served.rendered.estimated_tokens)
    fitting = max(1, math.floor(tokens * limit / size * MESSAGE_FIT_SHARE))
    asked = fitting if token_budget is None else min(token_budget, fitting)
    fitted, own = assemble(asked)
    refuse_over_message(fitted.rendered, limit, "the engine could not bring it within")
    action = EngineAction(
        "fitted_to_message",
        f"the view took {size:,} bytes, over the {limit:,} one message carries "
        f"(SESSIONSTORE_MAX_MESSAGE_MB): brought within ~{asked:,} tokens",
    )
    return replace(fitted, actions=(*served.actions, action, *fitted.actions)), own


def within_learned_bytes(
    assemble: Callable[[int | None], tuple[ServedView, bool]],
    served: ServedView,
    own: bool,
    token_budget: int | None,
) -> tuple[ServedView, bool]:
    """A view over the limit in bytes a provider's refusal taught (HTTP 413) would be
    refused again: the engine brings it under, as for a tighter token budget, by the
    means it has for any budget (compaction, recorded and audited), asked for the share
    of the view's tokens that the limit is of its bytes. A view that cannot be brought
    under is served as it is, saying so: the provider may take it yet, as the limit is
    kept with a margin, and if it refuses, the report shrinks the prompt again."""
    if served.view.settings.compaction.mode != "auto":
        return served, own  # the client keeps its prompt within the provider's limits
    allowed = served.view.learned.request_bytes_allowed
    over = served.rendered.json_bytes_over(allowed) if allowed else None
    if over is None:
        return served, own
    size = over
    actions = served.actions
    for _ in range(BYTE_FIT_ROUNDS):
        tokens = served.budget.provider_tokens(served.rendered.estimated_tokens)
        asked = tokens_within_bytes(tokens, size, allowed)
        if token_budget is not None:
            asked = min(asked, token_budget)
        try:
            fitted, own = assemble(asked)
        except PromptOverBudget:
            # Nothing more can be left out to fit so tight a budget: serve the view
            # within the session's own budget (what it could leave out, it has).
            fitted, own = assemble(token_budget)
        fitted_size = fitted.rendered.json_bytes
        outcome = (
            f"brought within ~{asked:,} tokens, {fitted_size:,} bytes"
            if not over_request_bytes(fitted_size, allowed)
            else f"still {fitted_size:,} bytes within ~{asked:,} tokens, served as it is"
        )
        actions = (
            *actions,
            EngineAction(
                "fitted_to_request_bytes",
                f"the view took {size:,} bytes, over the {allowed:,} kept under the "
                f"provider's limit in bytes (it refused a request of "
                f"{served.view.learned.request_bytes:,}): {outcome}",
            ),
            *fitted.actions,
        )
        shrank = fitted_size < size
        served, size = fitted, fitted_size
        if not shrank or not over_request_bytes(size, allowed):
            break
    return replace(served, actions=actions), own


def refuse_over_message(rendered: RenderedPrompt, limit: int, why: str) -> None:
    """Refuses, saying what to do, a view no message can carry."""
    size = rendered.json_bytes_over(limit)
    if size is not None:
        raise ViewOverMessageLimit(
            f"the prompt view takes {size:,} bytes, over the {limit:,} one message carries "
            f"(SESSIONSTORE_MAX_MESSAGE_MB), and {why}: compact the session (Compact), ask "
            "with a smaller token_budget, read the log in pages (GetDurableLog), or raise "
            "the limit on the server and the client's receive limit",
            size,
            limit,
        )
