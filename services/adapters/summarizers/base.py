"""What every summariser offers the compaction engine, and how it fails.

The engine summarises a compaction's chunks through a :class:`Summarizer`
without knowing whether a model or the offline writer does the work. Both
build the same prompt (:meth:`SummaryRequest.prompt`) and report its hash, so a
compaction's receipt says what was asked whichever one answered.

Failures are typed by what the engine should do next: shrink the request
(:class:`SummarizerOverflow`), wait and retry (:class:`SummarizerUnavailable`),
or give up (:class:`SummarizerError`, the base of both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from domain.content import Entry
from domain.context.compaction_planner import SUMMARIZATION_OVERHEAD_TOKENS
from domain.context.summary import SummaryPrompt, build_summary_prompt

DEFAULT_TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class SummaryResult:
    text: str
    model: str
    prompt_hash: str
    # As the provider reported them; None when it did not (or for the offline writer).
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_ms: int = 0


class SummarizerError(Exception):
    """A summariser call failed and retrying the same request will not help."""

    retryable = False

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        provider: str = "",
        model: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.provider = provider
        self.model = model

    def __str__(self) -> str:
        status = f" (status {self.status_code})" if self.status_code is not None else ""
        return f"{self.message}{status}"


class SummarizerOverflow(SummarizerError):
    """The request exceeded the summarising model's own context window."""


class SummarizerUnavailable(SummarizerError):
    """Rate limited, overloaded, a server error, no connection or a timeout: retryable."""

    retryable = True


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """One call to a summariser: the entries to summarise and everything that shapes
    the summary and the call."""

    entries: Sequence[Entry]
    previous_summary: str = ""
    instructions: str = ""
    identifier_policy: str = "preserve"
    identifier_instructions: str = ""
    # Notes on entries left out, which the summary must carry as written.
    notes: Sequence[str] = ()
    max_output_tokens: int = SUMMARIZATION_OVERHEAD_TOKENS
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    # Tool results longer than this are clipped in the prompt (None: kept whole).
    max_result_chars: int | None = None

    def prompt(self) -> SummaryPrompt:
        """The prompt a model is sent: the summary prompt, with the notes on left-out
        entries added to the instructions so the model copies them into the summary."""
        instructions = self.instructions
        if self.notes:
            listed = "\n".join(f"- {note}" for note in self.notes)
            copy = f"Copy these notes into Critical Context exactly as written:\n{listed}"
            instructions = f"{instructions.strip()}\n\n{copy}" if instructions.strip() else copy
        return build_summary_prompt(
            self.entries,
            previous_summary=self.previous_summary,
            instructions=instructions,
            identifier_policy=self.identifier_policy,
            identifier_instructions=self.identifier_instructions,
            max_result_chars=self.max_result_chars,
        )


class Summarizer(Protocol):
    # The model's name as configured, or "offline".
    name: str
    # The summarising model's own context window, in tokens.
    window_tokens: int

    def summarize(self, request: SummaryRequest) -> SummaryResult: ...

    def count_tokens(self, prompt: SummaryPrompt) -> int:
        """The prompt tokens the summarising model counts for ``prompt``, as sent."""
        ...


def with_notes(text: str, notes: Sequence[str]) -> str:
    """``text`` with each note it lacks added to its Critical Context section (or at the
    end when it has none): a model may drop them, and they must survive."""
    missing = [note for note in notes if note not in text]
    if not missing:
        return text
    added = "".join(f"- {note}\n" for note in missing)
    heading = "## Critical Context"
    at = text.find(heading)
    if at < 0:
        return f"{text.rstrip()}\n\n{heading}\n{added}".lstrip()
    line_end = text.find("\n", at)
    if line_end < 0:
        return f"{text}\n{added}"
    return text[: line_end + 1] + added + text[line_end + 1 :]
