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
