"""Recording what the context engine and the client decided: compactions and
their undo and redo, prunes, failed compactions and the provider's overflows.

Each command checks what the aggregate can (the cut moves forward, the prune
names tool output still in the prompt) and asks a ``History`` for the rest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime

from domain.compaction import Compaction, CompactionFailure, History, check_cut_point
from domain.compaction_events import (
    CompactionFailed,
    CompactionRecorded,
    CompactionRedone,
    CompactionUndone,
)
from domain.content import Entry, Role
from domain.context.calibration import (
    REQUEST_BYTES_SHARE,
    WindowLesson,
    learn_bytes,
    learn_tokens,
)
from domain.context.overflow import REQUEST_TOO_LARGE, OverflowReport
from domain.context.request_bytes import (
    check_request_bytes,
    check_sent_against_rendering,
    limit_in_store_measure,
)
from domain.context.window_guard import check_context_window
from domain.errors import (
    ContextWindowTooSmall,
    EntryNotFound,
    InvalidCutPoint,
    InvalidPrune,
    InvalidRequest,
    VersionOutOfRange,
    quoted,
)
from domain.pruning import PruneAction, PruneDecision
from domain.session_events import OverflowReported, PruneRecorded
from domain.session_state import SessionState

MAX_UNDO_REASON_CHARS = 2_000
MAX_PROVIDER_MESSAGE_CHARS = 4_000


class CompactionCommands(SessionState):
    """The commands that change what the prompt holds of the history."""

    def record_compaction(
        self,
        compaction: Compaction,
        history: History,
        *,
        prompt_tokens: int = -1,
        timestamp: datetime | None = None,
        idempotency_key: str = "",
        fingerprint: str = "",
    ) -> CompactionRecorded:
        compaction.validate()
        if self.entry_count == 0:
            raise InvalidCutPoint("the session has no entries to compact")
        self.check_fits("the summary", "summary", compaction.summary_tokens, "write a shorter one")
        position = check_cut_point(
            compaction.first_kept_entry_id,
            history,
            self.open_tool_calls,
            self.first_kept_position,
        )
        stale = self.compaction_count and not self.entries_since_compaction
        if stale and position <= self.first_kept_position:
            # Nothing new would be summarised: the cut must move forward.
            raise InvalidCutPoint(
                f"nothing was appended since the last compaction, and first_kept_entry_id "
                f"{quoted(compaction.first_kept_entry_id)} is where it already cuts; a "
                "compaction that directly follows another must cut later"
            )
        compaction.check_shrinks()
        return self._record(
            CompactionRecorded,
            compaction=compaction,
            first_kept_position=position,
            prompt_tokens=prompt_tokens,
            first_kept_version=history.entry_version(position),
            limits=[list(row) for row in self.limits],
            timestamp=timestamp,
            idempotency_key=idempotency_key,
            fingerprint=fingerprint,
        )

    def undo_compaction(
        self,
        compaction_version: int,
        reason: str,
        *,
        restored: tuple[int, int],
        prompt_tokens: int,
        requested_by: str = "",
    ) -> CompactionUndone:
        """Takes back the compaction recorded at ``compaction_version``, which must be in
        force; ``restored`` is the cut in force before it, (compaction version or 0,
        first kept position), as the history folded it."""
        if len(reason) > MAX_UNDO_REASON_CHARS:
            raise InvalidRequest(
                f"reason is {len(reason):,} characters; send at most {MAX_UNDO_REASON_CHARS:,}"
            )
        restored_version, position = restored
        if position > self.first_kept_position:
            raise InvalidRequest("undoing a compaction cannot move the cut forward")
        return self._record(
            CompactionUndone,
            compaction_version=compaction_version,
            reason=reason,
            first_kept_position=position,
            restored_compaction_version=restored_version,
            prompt_tokens=prompt_tokens,
            requested_by=requested_by,
        )

    def redo_compaction(
        self,
        undo_version: int,
        reason: str,
        *,
        compaction_versions: Sequence[int],
        first_kept_position: int,
        cuts: Sequence[Sequence[int]],
        prompt_tokens: int,
        requested_by: str = "",
    ) -> CompactionRedone:
        """Takes back the undo recorded at ``undo_version``: the compactions it took
        back (``compaction_versions``, oldest first, whose ``cuts`` the history
        gives) are in force again, and the cut is the newest one's."""
        if len(reason) > MAX_UNDO_REASON_CHARS:
            raise InvalidRequest(
                f"reason is {len(reason):,} characters; send at most {MAX_UNDO_REASON_CHARS:,}"
            )
        if not compaction_versions or len(cuts) != len(compaction_versions):
            raise InvalidRequest("taking back an undo needs the compactions it took back")
        if first_kept_position < self.first_kept_position:
            raise InvalidRequest("taking back an undo cannot move the cut backward")
        return self._record(
            CompactionRedone,
            undo_version=undo_version,
            compaction_versions=list(compaction_versions),
            reason=reason,
            first_kept_position=first_kept_position,
            prompt_tokens=prompt_tokens,
            cuts=[list(c) for c in cuts],
            requested_by=requested_by,
        )

    def record_prune(
        self,
        decisions: Sequence[PruneDecision],
        reason: str,
        history: History,
        prompt_tokens_after: Callable[[Sequence[PruneDecision]], int] | None = None,
        applied_edits_json: str = "",
    ) -> PruneRecorded:
        """Records prunes of tool results in the prompt view; ``prompt_tokens_after``
        counts the prompt's tokens with them, so the running estimate stays exact.
        A provider's report of its own edits (``applied_edits_json``) is recorded
        even when it cleared nothing the view still shows."""
        if not decisions and not applied_edits_json:
            raise InvalidRequest(
                "a prune needs at least one entry: name the tool results to prune in entries, "
                "or send the provider's report of its context edits in applied_edits_json"
            )
        seen: set[str] = set()
        for decision in decisions:
            decision.validate()
            if decision.entry_id in seen:
                raise InvalidRequest(
                    f"entry {quoted(decision.entry_id)} is pruned twice in one request"
                )
            seen.add(decision.entry_id)
            position = history.position_of(decision.entry_id)
            if position is None:
                raise EntryNotFound(f"entry {quoted(decision.entry_id)} is not in this session")
            if history.role_at(position) is not Role.TOOL:
                raise InvalidPrune(
                    f"entry {quoted(decision.entry_id)} is not a tool result; "
                    "only tool output is pruned"
                )
            if position < self.first_kept_position:
                raise InvalidPrune(
                    f"entry {quoted(decision.entry_id)} was compacted away and is not in the prompt"
                )
        policy = self.settings.pruning
        sized = [
            d.sized(policy.soft_trim_head_chars, policy.soft_trim_tail_chars) for d in decisions
        ]
        chars = [_prune_chars(history.entry(d.entry_id), d) for d in sized]
        return self._record(
            PruneRecorded,
            decisions=sized,
            reason=reason,
            chars=chars,
            prompt_tokens=prompt_tokens_after(sized) if prompt_tokens_after else -1,
            applied_edits_json=applied_edits_json,
        )

    def record_compaction_failure(self, failure: CompactionFailure) -> None:
        self.trigger_event(CompactionFailed, failure=failure)

    def report_overflow(
        self, report: OverflowReport, view_estimate: int | None = None
    ) -> OverflowReported:
        """Records the provider's refusal; ``overflow_attempts`` counts them per turn.

        What the report ``stated`` and ``view_estimate``, the store's estimate of the
        refused view, are lessons: the window in force and the calibration learn
        from them. An error that states no window still teaches one: the provider
        took no more than the refused prompt (see ``_inferred_window``). One refused
        for its bytes (``REQUEST_TOO_LARGE``) teaches none: a limit in bytes bounds no
        count of tokens (the bytes a token takes vary with what the prompt holds:
        prose, code, JSON, another script), and a window learned from it would shrink
        the budget, threshold and tool-result cap the model's window sets, and show
        as the session's window. It teaches a limit in bytes instead: the refused
        view's size (``report.refused_bytes``), under which later views keep their
        rendered size, so the conversation growing back does not hit it again; with
        the request's size as the client sent it (``report.sent_bytes``), views keep
        a share of that below it (see ``limit_in_store_measure``)."""
        provider, message, view_version = report.provider, report.message, report.view_version
        if not 1 <= view_version <= self.version:
            raise VersionOutOfRange(
                f"view_version {view_version} is not a version of this session (1 to "
                f"{self.version}); send the version of the prompt view the provider refused"
            )
        window_tokens, prompt_tokens, output_tokens = report.stated
        quoted_error = message[:200]
        model = self.settings.model
        window = None
        if window_tokens:
            window = WindowLesson(
                model,
                window_tokens,
                output_tokens,
                f"{provider} overflow: {quoted_error}",
                stated=True,
            )
        elif report.kind != REQUEST_TOO_LARGE:
            refused = self._refused_prompt_tokens(prompt_tokens, view_estimate)
            ceiling = self._inferred_window(refused)
            if ceiling or output_tokens:
                window = WindowLesson(
                    model,
                    ceiling,
                    output_tokens,
                    f"inferred: the error stated no window, and the provider refused a "
                    f"prompt of ~{refused:,} tokens: {provider} overflow: {quoted_error}",
                )
        self._check_window_after(window, message)
        wrong = check_request_bytes(report.sent_bytes)
        if wrong is None and report.kind == REQUEST_TOO_LARGE:
            wrong = check_sent_against_rendering(report.sent_bytes, report.refused_bytes)
        if wrong is not None:
            raise InvalidRequest(wrong)
        byte_limit = None
        if report.kind == REQUEST_TOO_LARGE:
            byte_limit = learn_bytes(
                model,
                limit_in_store_measure(
                    report.refused_bytes, report.sent_bytes, REQUEST_BYTES_SHARE
                ),
                self._byte_lesson_source(report, quoted_error),
            )
        lesson = None
        if prompt_tokens and view_estimate:
            lesson = learn_tokens(
                self.learned.calibration,
                model,
                view_estimate,
                prompt_tokens,
                f"{provider} overflow (view at version {view_version}): {quoted_error}",
            )
        return self._record(
            OverflowReported,
            provider=provider,
            status_code=report.status_code,
            message=message[:MAX_PROVIDER_MESSAGE_CHARS],
            kind=report.kind,
            view_version=view_version,
            view_hash=report.view_hash,
            window=window,
            lesson=lesson,
            byte_limit=byte_limit,
            request_bytes_sent=report.sent_bytes,
        )

    @staticmethod
    def _byte_lesson_source(report: OverflowReport, quoted_error: str) -> str:
        """Which figure a byte limit was learned from: the client's, as sent, or the
        store's rendering of the refused view."""
        provider, version, rendered = report.provider, report.view_version, report.refused_bytes
        if report.sent_bytes:
            return (
                f"{provider} refused a request of {report.sent_bytes:,} bytes as sent (the "
                f"store renders the view at version {version} in {rendered:,}): {quoted_error}"
            )
        return (
            f"{provider} refused a request of {rendered:,} bytes as the store rendered it "
            f"(view at version {version}): {quoted_error}"
        )

    def _refused_prompt_tokens(self, prompt_tokens: int, view_estimate: int | None) -> int:
        """The refused prompt as the provider counted it, else as the store does in the
        provider's tokens (0: neither known)."""
        if prompt_tokens:
            return prompt_tokens
        return math.ceil(view_estimate * self.calibration) if view_estimate else 0

    def _inferred_window(self, refused_tokens: int) -> int:
        """The window an overflow that states none teaches (0: none): the refused prompt.
        The provider took no more than that prompt and the answer's room asked, so with
        the reserve kept for the answer views stay below it, and a provider serving
        less than the model's metadata says stops refusing after one report instead of
        every few turns.

        With the guard on, a ceiling below its ``hard_min_tokens`` is raised to it, not
        refused as a stated one is: a provider's own figure that small names a model
        the session cannot work with, but one refusal only bounds the window (a large
        ``max_tokens`` or an image may have made it), and learning less than the guard
        accepts would refuse every later view. At the minimum the session keeps
        working, each report still compacts below the refused prompt, and if the
        provider goes on refusing, ``max_attempts`` ends the turn naming the remedies."""
        guard = self.settings.window_guard
        if refused_tokens and guard.enabled:
            return max(refused_tokens, guard.hard_min_tokens)
        return refused_tokens

    def _check_window_after(self, window: WindowLesson | None, message: str) -> None:
        """Refuses, before anything is recorded, a report after which the window guard
        would refuse the view it answers, and every later one: the report would be
        recorded and its lesson learned, yet the client would get only a refusal."""
        guard = self.settings.window_guard
        if not guard.enabled:
            return  # the client works in windows of any size
        learned, resolved = self.learned, self.context_window_tokens
        before = learned.window(resolved)
        after = before if window is None else learned.after_window(window).window(resolved)
        if after >= guard.hard_min_tokens:
            return
        if window is not None and after < before:
            raise ContextWindowTooSmall(
                f"the provider's error states a context window of {window.window_tokens:,} "
                f"tokens for model {quoted(window.model)} (read from {quoted(message, 120)}), "
                f"below the window guard's hard minimum of {guard.hard_min_tokens:,} tokens. "
                "Learning it would refuse every prompt view of this session, so the report "
                "is refused and nothing is recorded. If the model really serves so few "
                "tokens, switch to a model with a larger context window (UpdateSettings "
                "model); if the figure is not this model's window (a misread error, another "
                "deployment), compact the session (Compact) and retry the provider call",
                window.window_tokens,
                "learned",
                guard.hard_min_tokens,
            )
        source = self.window_source
        verdict = check_context_window(
            before,
            source,
            hard_min_tokens=guard.hard_min_tokens,
            warn_below_tokens=guard.warn_below_tokens,
        )
        raise ContextWindowTooSmall(
            f"{verdict.message}; the report is refused and nothing is recorded",
            before,
            source,
            guard.hard_min_tokens,
        )


def _prune_chars(entry: Entry, decision: PruneDecision) -> list[int]:
    """[characters of the entry's tool output, characters of it the prune keeps]:
    a soft trim keeps at most its head and tail of each result, a hard clear none."""
    sizes = [len(result.content) for result in entry.tool_results]
    if decision.action is PruneAction.HARD_CLEAR:
        return [sum(sizes), 0]
    kept = (decision.head_chars or 0) + (decision.tail_chars or 0)
    return [sum(sizes), sum(min(size, kept) for size in sizes)]
