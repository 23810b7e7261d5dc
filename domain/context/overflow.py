"""A provider's refusal of a prompt as too long, as a client reports it to the store."""

from __future__ import annotations

from dataclasses import dataclass


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
