"""Retrieval in assemble (seed 001's top-K injection): what compaction hid from the
prompt, brought back for the turn that needs it.

With ``memory.retrieval_top_k`` set, a served prompt view holds, right before
the newest user turn, one marked context block with the best recalled hits
for that turn's words (or meaning), from the entries the view no longer
shows. Hits are added only while the view stays within its budget; what was
added, or why nothing was, is one of the view's actions. The block is the
view's, never the log's: the durable log is not rewritten.

The block is an entry of the view with an id made from its text, so the
renderer's per-entry cache can never serve one block for another.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import replace

import structlog

from domain.content import Entry, Role, TextBlock
from domain.context.budget import ContextBudget
from domain.errors import DomainError
from projections.session_history import PromptView
from services.adapters.tokenizers import tokenizer_for
from services.app.recall import MAX_LIMIT, MAX_QUERY_CHARS, RecallHit, RecallQuery, RecallService
from services.engine.base import EngineAction

OPEN = '<recalled_context source="session history hidden by compaction">'
CLOSE = "</recalled_context>"
RECALLED_TYPE = "recalled_context"
# The longest a prompt view waits for an embedding of its newest turn.
RETRIEVAL_SECONDS = 2.0
log = structlog.get_logger(__name__)


class Retrieval:
    def __init__(self, recall: RecallService | None) -> None:
        self.recall = recall

    def add_to(
        self, view: PromptView, budget: ContextBudget, deadline: float | None = None
    ) -> tuple[PromptView, EngineAction | None]:
        """The view with the recalled block before its newest user turn, and the action
        that says so; the view as it is (and no action) when retrieval is off. An
        embedding provider gets at most half of what is left before ``deadline``
        (time.monotonic()), and never more than RETRIEVAL_SECONDS: the view waits."""
        top_k = view.settings.memory.retrieval_top_k
        entries = list(view.log.entries)
        newest = next(
            (i for i in range(len(entries) - 1, -1, -1) if entries[i].role is Role.USER), None
        )
        if not top_k or self.recall is None or newest is None:
            return view, None
        query = " ".join(b.text for b in entries[newest].content if isinstance(b, TextBlock))
        if not query.strip():
            return view, None
        version = view.log.version
        try:
            # No wait for the index (min_position -1): the newest turns may not be in it
            # yet, and what the view misses is older than them anyway.
            found = self.recall.recall(
                view.log.session_id,
                RecallQuery(
                    query=query[:MAX_QUERY_CHARS],
                    limit=min(MAX_LIMIT, top_k * 3),
                    min_position=-1,
                ),
                min(
                    deadline or math.inf,
                    time.monotonic() + 2 * RETRIEVAL_SECONDS,  # the recall gives half of it
                ),
            )
        except DomainError as error:
            return view, EngineAction("recall_skipped", str(error), version)
        except Exception as error:  # a fault of the index: the view is served without it
            log.exception("recall failed for a prompt view", session_id=view.log.session_id)
            detail = (
                f"recall failed ({type(error).__name__}; logged): the view holds no recalled block"
            )
            return view, EngineAction("recall_skipped", detail, version)
        shown = {e.id for e in (*view.log.pinned, *entries)}
        hits = [h for h in found.hits if h.entry_id not in shown][:top_k]
        counter = tokenizer_for(view.settings.model)
        while hits:
            text = _block(hits)
            tokens = counter.count_text(text)
            if budget.fits(view.estimated_tokens + tokens):
                break
            hits = hits[:-1]  # the weakest hit goes first
        if not hits:
            return view, EngineAction(
                "recall_skipped", "no hidden entry matched, or none fitted the budget", version
            )
        block = Entry(
            id="recalled-" + hashlib.sha256(text.encode()).hexdigest()[:16],
            parent_id=None,
            timestamp=None,
            role=Role.USER,
            content=(TextBlock(text),),
            custom_type=RECALLED_TYPE,
            token_count=tokens,
            tokenizer=counter.name,
        )
        versions = list(view.log.entry_versions)
        with_block = replace(
            view.log,
            entries=[*entries[:newest], block, *entries[newest:]],
            entry_versions=[*versions[:newest], versions[newest], *versions[newest:]],
        )
        detail = (
            f"{len(hits)} hidden entries recalled for the newest user turn (~{tokens:,} "
            "tokens): " + ", ".join(f"{h.entry_id} (v{h.version})" for h in hits)
        )
        recalled = replace(view, log=with_block, estimated_tokens=view.estimated_tokens + tokens)
        return recalled, EngineAction("recalled", detail, version)


def _block(hits: list[RecallHit]) -> str:
    lines = [
        OPEN,
        "Earlier parts of this conversation, no longer in the prompt, that may bear on the "
        "next message (read one whole with GetEntry, search more with Recall):",
    ]
    for hit in hits:
        lines.append(f"- entry {hit.entry_id} ({hit.role}, version {hit.version}): {hit.snippet}")
    lines.append(CLOSE)
    return "\n".join(lines)
