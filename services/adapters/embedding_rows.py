"""The recall cache's embedding rows read back as vectors, the damaged ones set aside.

A cached embedding is derived data: the provider makes it again from the
chunk's text whenever asked. A row that is no vector of the model's (its
bytes cut short or padded past its stated dimensions, values that are NaN or
infinite, or a size other than the model's vectors have now, as rows made
before the model changed have) is therefore never an error for the reader:
it is reported, and the caller treats it as missing and embeds its text
again, so a search (and the prompt view whose retrieval runs one) is served
whatever the cache holds. Every reader of the cache decodes here, once.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    import numpy as np

FLOAT_BYTES = 4
# Damaged rows named in one warning; the count says how many there were in all.
LOGGED_ROWS = 20
# Damaged rows already reported, so each is logged once while it stays damaged
# (a provider that cannot embed it again leaves it so across searches).
REMEMBERED_REPORTS = 100_000

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class DecodedEmbeddings:
    """Of the rows decoded: the sound ones' vectors, as the rows of ``matrix`` in order
    (``kept`` holds their indices among the rows read), all of ``size`` dimensions
    (None when no row was sound and no size was asked for); and why each of the
    others (by index) could not be used."""

    matrix: np.ndarray
    kept: list[int]
    damaged: dict[int, str]
    size: int | None


def decode_embeddings(
    rows: Sequence[tuple[Any, Any]], size: int | None = None
) -> DecodedEmbeddings:
    """The rows, each (vector bytes, stated dimensions), as float32 vectors of ``size``
    dimensions, or of the size most of the sound rows have when ``size`` is None:
    vectors of two sizes cannot be scored against one query."""
    import numpy as np

    damaged: dict[int, str] = {}
    sizes: dict[int, int] = {}
    for index, (stored, dimensions) in enumerate(rows):
        reason = _malformed(stored, dimensions)
        if reason is None:
            sizes[index] = dimensions
        else:
            damaged[index] = reason
    if size is None and sizes:
        size = Counter(sizes.values()).most_common(1)[0][0]
    kept = []
    for index, dimensions in sizes.items():
        if dimensions == size:
            kept.append(index)
        else:
            damaged[index] = f"{dimensions} dimensions, where the model's vectors have {size}"
    joined = b"".join(bytes(rows[i][0]) for i in kept)
    matrix = np.frombuffer(joined, dtype="<f4").reshape(len(kept), size or 0)
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        for index, sound in zip(kept, finite.tolist(), strict=True):
            if not sound:
                damaged[index] = "values that are not finite numbers (NaN or infinity)"
        kept = [i for i, sound in zip(kept, finite.tolist(), strict=True) if sound]
        matrix = matrix[finite]
    return DecodedEmbeddings(matrix, kept, damaged, size)


def _malformed(stored: Any, dimensions: Any) -> str | None:
    """Why the row is no vector of its stated dimensions, or None when it is one."""
    if not isinstance(stored, bytes | bytearray | memoryview):
        return f"a vector stored as {type(stored).__name__}, not bytes"
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions <= 0:
        return f"stated dimensions {dimensions!r}"
    if len(stored) != dimensions * FLOAT_BYTES:
        return (
            f"{len(stored)} bytes, where {dimensions} float32 values take "
            f"{dimensions * FLOAT_BYTES}"
        )
    return None


@dataclass(frozen=True)
class DamagedEmbedding:
    """A cached embedding set aside, and whose it is: the text's content hash, and the
    session and entry holding the text when the row was read for a chunk."""

    content_hash: str
    reason: str
    session_id: str | None = None
    entry_id: str | None = None

    def identity(self) -> dict[str, str]:
        named = {"content_hash": self.content_hash, "reason": self.reason}
        if self.session_id is not None:
            named["session_id"] = self.session_id
        if self.entry_id is not None:
            named["entry_id"] = self.entry_id
        return named


class DamageReports:
    """Logs each damaged row once, as a warning naming it, until it is embedded again."""

    def __init__(self) -> None:
        self._reported: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    def report(self, provider: str, model: str, damaged: Sequence[DamagedEmbedding]) -> None:
        with self._lock:
            new = [d for d in damaged if (provider, model, d.content_hash) not in self._reported]
            if len(self._reported) + len(new) > REMEMBERED_REPORTS:
                self._reported.clear()  # a few rows logged twice, not a memory that grows
            self._reported.update((provider, model, d.content_hash) for d in new)
        if not new:
            return
        log.warning(
            "damaged cached embeddings skipped: recall embeds their text again",
            provider=provider,
            model=model,
            damaged=len(new),
            rows=[d.identity() for d in new[:LOGGED_ROWS]],
        )

    def replaced(self, provider: str, model: str, hashes: Sequence[str]) -> None:
        """The rows of these hashes were stored anew: one damaged again is news."""
        with self._lock:
            for content_hash in hashes:
                self._reported.discard((provider, model, content_hash))
