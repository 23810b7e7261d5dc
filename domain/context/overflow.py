"""A provider's refusal of a prompt as too long, as a client reports it to the store."""

from __future__ import annotations

from dataclasses import dataclass

# The refusals ReportOverflow acts on, as services.adapters.overflow tells them apart.
# The prompt was over the model's window in tokens.
CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
# The request was over the provider's limit in bytes (HTTP 413; Anthropic's
# ``request_too_large``): shrinking the prompt helps, but bytes are not tokens, so
# the refusal bounds no token window (see Session.report_overflow).
REQUEST_TOO_LARGE = "request_too_large"


@dataclass(frozen=True, slots=True)
class OverflowReport:
    """The refusal, and the prompt view it refused (its version and request hash)."""

    provider: str
    status_code: int
    # The provider's error text, as received.
    message: str
    view_version: int
    view_hash: str
    # What kind of refusal the store found it to be (services.adapters.overflow).
    kind: str = ""
    # What the error stated: (window, its count of the refused prompt, the answer's
    # room asked for), 0 where it said nothing.
    stated: tuple[int, int, int] = (0, 0, 0)
    # A request refused for its bytes: the refused view's size as the store rendered
    # it (messages, system prompt and tools, in the client's format); 0: unmeasured.
    refused_bytes: int = 0
    # The refused request's size in bytes as the client sent it (0: it did not say).
    sent_bytes: int = 0
