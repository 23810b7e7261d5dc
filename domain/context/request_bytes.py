"""How a prompt view keeps under a limit in bytes the provider taught.

A request refused for its bytes (see domain.context.calibration.ByteLesson) bounds
the size of the request, not its tokens, and no token figure converts to bytes
exactly (code, JSON and another script take more bytes a token than prose). So
the store measures each view as rendered, and one over the limit is compacted
as for a tighter token budget, in proportion of its tokens to its bytes.
"""

from __future__ import annotations

import math

# A view over the limit is brought to this share of it, so that the turns after
# grow for a while before the next compaction (as a compaction aims below the
# token threshold), and a rendering whose bytes a token differ from the view's
# average still lands under it.
FIT_TARGET_SHARE = 0.7


def over_request_bytes(request_bytes: int, allowed_bytes: int) -> bool:
    """Whether a view rendered as ``request_bytes`` is over the learned limit (an
    ``allowed_bytes`` of 0: none learned)."""
    return bool(allowed_bytes) and request_bytes > allowed_bytes


def tokens_within_bytes(tokens: int, request_bytes: int, allowed_bytes: int) -> int:
    """The token budget that brings a view of ``tokens`` rendered as ``request_bytes``
    under ``allowed_bytes``: its tokens in the share its bytes must shrink to, with
    the fit's margin below the limit."""
    share = allowed_bytes / max(1, request_bytes)
    return max(1, math.floor(tokens * share * FIT_TARGET_SHARE))


# No provider takes a request anywhere near this (Anthropic's Messages API: 32 MB):
# a larger figure is a mistake (bits, or a sum over retries), not a size.
MAX_REQUEST_BYTES = 1 << 30
# The request carried the view, which the store renders in the same format: a
# client's encoding may be more compact (no escapes of non-ASCII text: a third of
# the bytes at worst), but a figure under a quarter of the rendering is no measure
# of that request (kilobytes for bytes, say).
MIN_SHARE_OF_RENDERING = 0.25


def check_request_bytes(sent_bytes: int) -> str | None:
    """What is wrong with the size in bytes a client says the refused request took
    (0: it sent none), or None."""
    if sent_bytes < 0:
        return (
            f"request_bytes {sent_bytes:,} is negative: send the size in bytes of the "
            "request the provider refused, as sent, or 0 for the store to measure its "
            "own rendering of the view"
        )
    if sent_bytes > MAX_REQUEST_BYTES:
        return (
            f"request_bytes {sent_bytes:,} is more than any provider takes in one request "
            f"(the store takes at most {MAX_REQUEST_BYTES:,}): send the size in bytes of "
            "the request the provider refused, as sent, or 0 for the store to measure its "
            "own rendering of the view"
        )
    return None


def check_sent_against_rendering(sent_bytes: int, rendered_bytes: int) -> str | None:
    """What is wrong with a client's figure for a request that carried a view the store
    renders in ``rendered_bytes``, or None."""
    if sent_bytes and rendered_bytes and sent_bytes < rendered_bytes * MIN_SHARE_OF_RENDERING:
        return (
            f"request_bytes {sent_bytes:,} is less than a quarter of the refused view as the "
            f"store renders it ({rendered_bytes:,} bytes), which the request carried: send "
            "the size in bytes of the request body the provider refused, as sent, or 0 for "
            "the store to measure its own rendering of the view"
        )
    return None


def limit_in_store_measure(rendered_bytes: int, sent_bytes: int, share: float) -> int:
    """The limit a request refused for its bytes teaches, in the store's measure of a
    view (its rendering), such that views kept under ``share`` of it stay far enough
    below the refused view. ``rendered_bytes`` is the refused view as the store renders
    it; ``sent_bytes`` the request as the client sent it (0: unknown).

    The margin (1 - ``share``) must cover what the turn before the refusal added: the
    refused request was over the limit by at most that much. A turn's growth is in
    proportion to the provider's limit, which the request as sent measures; the store's
    rendering leaves out what the client adds (its own tools or system prompt, its
    library's JSON), and a fifth of a rendering a fraction of the request would leave
    too little room. So the margin is a fifth of the larger figure, taken off the
    rendering: what the client adds stays the same from one request to the next, and
    cancels out. Without a figure sent, that is ``share`` of the rendering, as before.
    Recorded over ``share`` (so ``share`` of it is the rendering views keep under),
    at least what leaves a view one byte: a client whose own part takes the margin
    has the store compact all it can."""
    if rendered_bytes <= 0:
        return sent_bytes  # no rendering to measure against (the report is refused)
    if sent_bytes <= rendered_bytes:
        return rendered_bytes
    allowed = rendered_bytes - math.ceil(sent_bytes * (1 - share))
    # Rounded down, so that ``share`` of it, rounded down, is not over ``allowed``.
    return max(2, math.floor(allowed / share))
