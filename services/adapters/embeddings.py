"""Embeddings through litellm (``litellm.embedding``), for recall by meaning.

Keys come from the environment as litellm reads them (``OPENAI_API_KEY``...);
``api_base`` says where the model is served, as for the summariser. A call
that fails or takes longer than its timeout, or answers what is no set of
vectors of one size and of finite numbers, raises EmbeddingFailed: the
search then answers by full text alone rather than fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from services.adapters.litellm_loader import load_litellm

if TYPE_CHECKING:
    # Imported where first needed: numpy's import starts its BLAS threads, and a
    # thread started before the server blocks its stop signals takes them, by
    # the default action (the process ends at once).
    import numpy as np

# Inputs per provider call: OpenAI takes up to 2,048; fewer keeps each request small.
BATCH = 256


# Embedding calls in flight; one that outlives its search finishes here, unawaited.
_calls = ThreadPoolExecutor(max_workers=4, thread_name_prefix="embeddings")


class EmbeddingFailed(Exception):
    """The provider did not embed the texts (down, refused, too slow)."""


def provider_key(model: str, api_base: str) -> str:
    """What, with the model, names an embedding space in the cache: the litellm
    provider prefix and where it is served (one model name on two servers may
    be two models)."""
    prefix = model.split("/", 1)[0] if "/" in model else "openai"
    return f"{prefix}@{api_base}" if api_base else prefix


def embed(model: str, api_base: str, texts: Sequence[str], timeout: float) -> np.ndarray:
    """The texts' embeddings as rows of a float32 matrix, within ``timeout`` seconds in
    all. The calls run on a thread of their own and are waited for no longer: the
    provider's client retries a timed-out call by itself (litellm takes a max_retries
    of 0 for its default), which would stretch one timeout into three."""
    load_litellm()  # its first import takes seconds, which are not the provider's
    future = _calls.submit(_embed, model, api_base, list(texts), timeout)
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        raise EmbeddingFailed(f"{model} did not answer within {timeout:.1f} s") from None


def _embed(model: str, api_base: str, texts: list[str], timeout: float) -> np.ndarray:
    litellm = load_litellm()
    rows: list[Any] = []
    for start in range(0, len(texts), BATCH):
        batch = texts[start : start + BATCH]
        try:
            response: Any = litellm.embedding(
                model=model, input=batch, api_base=api_base or None, timeout=timeout
            )
        except Exception as error:
            raise EmbeddingFailed(f"{type(error).__name__}: {error}") from error
        data = sorted(response.data, key=lambda d: d["index"])
        if len(data) != len(batch):
            raise EmbeddingFailed(
                f"{model} answered {len(data)} embeddings for {len(batch)} inputs"
            )
        rows += [d["embedding"] for d in data]
    return _checked(model, rows, len(texts))


def _checked(model: str, rows: list[Any], count: int) -> np.ndarray:
    """The answer as a matrix, when it is one of finite numbers: an answer of vectors
    of two sizes, or holding NaN, would otherwise be cached, and fail (or mislead)
    every search that read it."""
    import numpy as np

    try:
        matrix = np.asarray(rows, dtype=np.float32).reshape(count, -1)
    except (ValueError, TypeError) as error:
        raise EmbeddingFailed(
            f"{model} answered embeddings that are no vectors of one size"
        ) from error
    if matrix.shape[1] == 0 or not np.isfinite(matrix).all():
        raise EmbeddingFailed(
            f"{model} answered empty embeddings, or ones that are not all finite numbers"
        )
    return matrix
