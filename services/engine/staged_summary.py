"""Carrying out a compaction plan's summary: chunk by chunk, rolling, within the window.

SPEC 3.3: the planner has cut the summarised part into chunks sized for the
summarising model; this module asks the model for the summary in stages, each
call given the summary so far, so no call carries more than one chunk.

It also holds the line the planner can only estimate: before each call the
request is built and counted exactly as it will be sent (the summariser's own
count of its messages), and a request that would not fit the summariser's
window, less the room for its answer, is never sent. The fallbacks, most lossy
last:

* ``full`` - every chunk summarised whole;
* ``split`` - a chunk did not fit (or the model said it overflowed), so it was
  summarised in halves, down to single entries;
* ``clipped`` - a single entry still did not fit, so its tool results were
  clipped (the full output stays in the store);
* ``oversized-omitted`` - entries too large to summarise at all were left
  out, each with a note (``[Large tool (~60K tokens) omitted from summary]``).

Retryable failures (rate limits, overload, 5xx, timeouts) are retried twice
with a short backoff; an overall timeout ends a stuck compaction with
:class:`CompactionStepFailed`, as does any other failure, so the caller can
record it and fall back.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from domain.content import Entry
from domain.context.compaction_planner import (
    SUMMARIZATION_OVERHEAD_TOKENS,
    CompactionPlan,
    OversizedEntry,
)
from services.adapters.summarizers.base import (
    Summarizer,
    SummarizerError,
    SummarizerOverflow,
    SummarizerUnavailable,
    SummaryRequest,
    SummaryResult,
    with_notes,
)
from services.adapters.summarizers.offline import UNLIMITED_WINDOW_TOKENS

DEFAULT_TIMEOUT_SECONDS = 300.0
# A tool result is never clipped shorter than this: below it, leave the entry out.
MIN_RESULT_CHARS = 500
# Each try at clipping a result keeps this share of the previous try.
CLIP_SHRINK = 0.7
STAGES = ("full", "split", "clipped", "oversized-omitted")


class CompactionStepFailed(Exception):
    """A compaction's summary could not be written: at ``stage``, for ``reason``."""

    def __init__(self, stage: str, reason: str) -> None:
        super().__init__(f"compaction failed at stage {stage!r}: {reason}")
        self.stage = stage
        self.reason = reason


@dataclass(frozen=True, slots=True)
class StagedSummary:
    text: str
    # The most lossy fallback used (see STAGES); ``fallbacks`` lists all of them.
    stage: str
    fallbacks: tuple[str, ...]
    chunks_summarised: int
    # Successful summariser calls; failed attempts are counted apart.
    calls: int
    failed_calls: int
    prompt_hashes: tuple[str, ...]
    # sha256 over prompt_hashes: the receipt of everything the summary was asked from.
    prompt_hash: str
    model: str
    input_tokens: int
    output_tokens: int
    duration_ms: int
    notes: tuple[str, ...]


def combined_hash(hashes: Sequence[str]) -> str:
    canonical = json.dumps(list(hashes), separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class _Run:
    summarizer: Summarizer
    instructions: str
    identifier_policy: str
    identifier_instructions: str
    timeout_seconds: float
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    retries: int
    backoff_seconds: float
    summary: str
    # The most the summary may take (the model's max_tokens): the plan's summary budget.
    max_output_tokens: int = SUMMARIZATION_OVERHEAD_TOKENS
    deadline: float = 0.0
    stage: str = "full"
    fallbacks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    results: list[SummaryResult] = field(default_factory=list)
    failed_calls: int = 0

    @property
    def budget_tokens(self) -> int:
        """What one request's prompt may count: the window less the output reserve."""
        return self.summarizer.window_tokens - self.max_output_tokens

    def fell_back(self, stage: str) -> None:
        if stage not in self.fallbacks:
            self.fallbacks.append(stage)
        if STAGES.index(stage) > STAGES.index(self.stage):
            self.stage = stage

    # -- sizing ------------------------------------------------------------------------

    def estimate(
        self,
        entries: Sequence[Entry],
        max_result_chars: int | None = None,
        notes: Sequence[str] = (),
    ) -> int:
        """The request's prompt tokens, counted on exactly what would be sent."""
        request = self.request(entries, notes, max_result_chars)
        return self.summarizer.count_tokens(request.prompt())

    def request(
        self,
        entries: Sequence[Entry],
        notes: Sequence[str],
        max_result_chars: int | None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> SummaryRequest:
        """The call this step makes to summarise ``entries``."""
        return SummaryRequest(
            entries,
            previous_summary=self.summary,
            instructions=self.instructions,
            identifier_policy=self.identifier_policy,
            identifier_instructions=self.identifier_instructions,
            notes=notes,
            max_output_tokens=self.max_output_tokens,
            timeout_seconds=timeout_seconds,
            max_result_chars=max_result_chars,
        )

    def fits(
        self,
        entries: Sequence[Entry],
        max_result_chars: int | None = None,
        notes: Sequence[str] = (),
    ) -> bool:
        if self.summarizer.window_tokens >= UNLIMITED_WINDOW_TOKENS:
            return True  # the offline writer reads entries; no request is sent
        return self.estimate(entries, max_result_chars, notes) <= self.budget_tokens

    def clip_limit(self, entry: Entry, notes: Sequence[str]) -> int:
        """About the longest tool result (in characters) that lets ``entry`` fit one
        request, at the entry's own characters per token; ``fits`` has the last word."""
        results = entry.tool_results
        if not results:
            return 0
        room = self.budget_tokens - self.estimate([entry], 0, notes)
        chars = sum(len(r.content) for r in results)
        per_token = chars / max(1, entry.token_count)
        return max(0, math.floor(room * per_token) // len(results))

    # -- summarising -------------------------------------------------------------------

    def summarise(self, entries: Sequence[Entry], notes: Sequence[str]) -> None:
        if not self.fits([]):
            raise CompactionStepFailed(
                self.stage,
                f"the summary so far (~{self.estimate([]):,} tokens with the prompt) leaves no "
                f"room in the summariser's window ({self.summarizer.window_tokens:,} tokens)",
            )
        if len(entries) == 1:
            self.summarise_one(entries[0], notes)
            return
        if self.fits(entries, None, notes):
            try:
                self.call(entries, notes, None)
                return
            except SummarizerOverflow:
                pass
        self.fell_back("split")
        half = len(entries) // 2
        self.summarise(entries[:half], ())
        self.summarise(entries[half:], notes)

    def summarise_one(self, entry: Entry, notes: Sequence[str]) -> None:
        limit: int | None = None
        if not self.fits([entry], None, notes):
            limit = self._clipped_to_fit(entry, notes, self.clip_limit(entry, notes))
        for _ in range(3):
            if limit is not None and limit < MIN_RESULT_CHARS:
                self.omit(entry)
                return
            if limit is not None:
                self.fell_back("clipped")
            try:
                self.call([entry], notes, limit)
                return
            except SummarizerOverflow as overflow:
                if not entry.tool_results:
                    raise CompactionStepFailed(
                        self.stage, f"entry {entry.id} alone overflows the summariser: {overflow}"
                    ) from overflow
                start = self.clip_limit(entry, notes) if limit is None else limit // 4
                limit = self._clipped_to_fit(entry, notes, start)
        raise CompactionStepFailed(
            self.stage, f"entry {entry.id} overflows the summariser even with clipped results"
        )

    def _clipped_to_fit(self, entry: Entry, notes: Sequence[str], limit: int) -> int:
        """The longest clip from ``limit`` down whose request fits (below the minimum: 0)."""
        while limit >= MIN_RESULT_CHARS and not self.fits([entry], limit, notes):
            limit = math.floor(limit * CLIP_SHRINK)
        return limit if limit >= MIN_RESULT_CHARS else 0

    def omit(self, entry: Entry) -> None:
        self.fell_back("oversized-omitted")
        note = OversizedEntry(entry.id, entry.role.value, entry.token_count).note
        self.notes.append(note)

    def call(self, entries: Sequence[Entry], notes: Sequence[str], limit: int | None) -> None:
        attempt = 0
        while True:
            remaining = self.deadline - self.clock()
            if remaining <= 0:
                raise CompactionStepFailed(self.stage, self._timed_out())
            try:
                result = self.summarizer.summarize(
                    self.request(entries, notes, limit, timeout_seconds=remaining)
                )
            except SummarizerOverflow:
                self.failed_calls += 1
                raise
            except SummarizerUnavailable as error:
                self.failed_calls += 1
                if self.clock() >= self.deadline:
                    raise CompactionStepFailed(self.stage, self._timed_out(error)) from error
                if attempt >= self.retries:
                    raise CompactionStepFailed(
                        self.stage,
                        f"summariser unavailable after {attempt + 1} attempts: {error}",
                    ) from error
                attempt += 1
                pause = self.backoff_seconds * 2 ** (attempt - 1)
                self.sleep(max(0.0, min(pause, self.deadline - self.clock())))
                continue
            except SummarizerError as error:
                self.failed_calls += 1
                raise CompactionStepFailed(self.stage, f"summariser failed: {error}") from error
            self.results.append(result)
            self.summary = result.text
            return

    def _timed_out(self, error: Exception | None = None) -> str:
        cause = f" (last error: {error})" if error is not None else ""
        return f"timed out after {self.timeout_seconds:g} s{cause}"


def summarize_plan(
    plan: CompactionPlan,
    entries_by_id: Mapping[str, Entry],
    summarizer: Summarizer,
    *,
    previous_summary: str,
    instructions: str,
    identifier_policy: str,
    identifier_instructions: str = "",
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    retries: int = 2,
    backoff_seconds: float = 0.5,
) -> StagedSummary:
    """The summary of ``plan``'s chunks, rolled forward from ``previous_summary``.

    Raises :class:`CompactionStepFailed` when the summary cannot be written:
    a non-retryable summariser error, retries exhausted, an entry that
    overflows even clipped, or ``timeout_seconds`` passed.
    """
    run = _Run(
        summarizer,
        instructions,
        identifier_policy,
        identifier_instructions,
        timeout_seconds,
        clock,
        sleep,
        retries,
        backoff_seconds,
        previous_summary,
        min(SUMMARIZATION_OVERHEAD_TOKENS, plan.summary_budget_tokens),
    )
    started = clock()
    run.deadline = started + timeout_seconds
    if plan.oversized:
        run.fell_back("oversized-omitted")
        run.notes.extend(o.note for o in plan.oversized)
    chunks = [_entries(chunk.entry_ids, entries_by_id) for chunk in plan.chunks]
    for index, chunk in enumerate(chunks):
        # The last call is told of the left-out entries, so the model writes their notes.
        last = index == len(chunks) - 1
        run.summarise(chunk, tuple(run.notes) if last else ())
    hashes = tuple(r.prompt_hash for r in run.results)
    return StagedSummary(
        text=with_notes(run.summary, run.notes),
        stage=run.stage,
        fallbacks=tuple(run.fallbacks) or ("full",),
        chunks_summarised=len(chunks),
        calls=len(run.results),
        failed_calls=run.failed_calls,
        prompt_hashes=hashes,
        prompt_hash=combined_hash(hashes),
        model=summarizer.name,
        input_tokens=sum(r.input_tokens or 0 for r in run.results),
        output_tokens=sum(r.output_tokens or 0 for r in run.results),
        duration_ms=round((clock() - started) * 1000),
        notes=tuple(run.notes),
    )


def _entries(ids: Sequence[str], entries_by_id: Mapping[str, Entry]) -> list[Entry]:
    missing = [i for i in ids if i not in entries_by_id]
    if missing:
        raise CompactionStepFailed("full", f"the plan names entries not given: {missing[:5]}")
    return [entries_by_id[i] for i in ids]
