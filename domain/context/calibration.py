"""What the provider teaches the store about its tokens and its window.

The store counts every entry once, with the tokenizer it has for the model;
the provider counts with its own (Claude's counts ~1.15-1.3x o200k's), and
serves the window it serves, whatever the model's metadata says. Two kinds of
lesson correct the store, each recorded in the event that taught it, with its
source, so every reader (the aggregate, the read side, a replay) folds the same
figures:

* :class:`TokenLesson` - the provider counted ``provider_tokens`` for a prompt
  the store estimated at ``estimated_tokens``: a usage report on an assistant
  turn that answered a view, or the count an overflow error states. The first
  lesson sets the session's calibration for the model, bounded so a mistaken
  report cannot make the store absurd. Later ones make it err high, as errors
  cost unequally: the provider's count per store token differs with what the
  prompt holds (text, source code, JSON tool output, images), so it drifts with
  the mix, and a figure below the provider's count lets a view overflow the
  window (the request is refused, the agent stranded if it happens again) where
  one above it only compacts earlier than needed. A lesson counting more is
  adopted at once (the burst of tool results that taught it is still in the next
  view); one counting less moves the figure a quarter of the way down, so it
  comes down over several consistent lessons, not on one turn of plain text
  after an image-heavy one. One figure per model, not one per content kind: the
  provider reports one count per prompt, so ratios per kind could only be
  solved for across many prompts of different mixes, while a session's views
  differ little from one to the next (each is the one before and a turn); such
  a fit is unstable, and would still undercount a kind until one had been seen.
  Only lessons learned under this rule follow it: readers fold each lesson's
  recorded figure, so stored events read as they did.
* :class:`WindowLesson` - an overflow error stated the window (and the answer's
  room the client asked for), or, stating none, refused a prompt of a size that
  bounds it (``source`` says "inferred"): the window in force is the smaller of the
  resolved one and this one, until the client sets the session's window itself
  (``context_window_tokens``: its word, the later one, wins) or has the session
  forget what was learned. An inferred window is also lifted by a usage report
  counting an accepted prompt larger than it (the provider serves more after all:
  the refusal was the answer's room, or the model moved); the lesson records the
  lift (``TokenLesson.lifted_window_tokens``). A stated window is the provider's
  own figure, and a usage report above it more likely a client's mistake (usage
  summed over several calls, another request's) than a provider serving more than
  it says, so no usage report lifts it.
* :class:`ByteLesson` - the provider refused a request for its size in bytes
  (HTTP 413, Anthropic's ``request_too_large``): its limit is at most the refused
  request's bytes, as the store measured the view it served. It bounds no token
  window (the bytes a token takes vary with what the prompt holds), so it is a
  limit of its own: views keep their rendered size under a share of the smallest
  request refused so (``LearnedLimits.request_bytes_allowed``), and the same limit
  is not hit again as the conversation grows back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

# A provider's count more than 4x off the estimate is a mistake, not a calibration.
MAX_CALIBRATION = 4.0
MIN_CALIBRATION = 1 / MAX_CALIBRATION
# The share of the way a lesson counting less than the running calibration moves it
# down (one counting more is adopted whole): see learn_tokens.
LOWER_LESSON_WEIGHT = 0.25
# A lesson from a prompt this small says little (per-message overheads dominate it).
MIN_LESSON_TOKENS = 200
MAX_SOURCE_CHARS = 300
# Views keep their rendered size under this share of the smallest request refused for
# its bytes. That request was over the limit by at most what the turn before it
# added, and the client's request is not the store's rendering byte for byte (its
# own JSON spacing, the model, the parameters, a format converted by its library).
REQUEST_BYTES_SHARE = 0.8


@dataclass(frozen=True, slots=True)
class TokenLesson:
    """The provider counted ``provider_tokens`` where the store estimated
    ``estimated_tokens``; ``calibration`` is the session's ratio for ``model`` after it."""

    model: str
    estimated_tokens: int
    provider_tokens: int
    calibration: float
    # "usage of entry <id> (view <version>)" or "overflow report: <provider's words>".
    source: str
    # The inferred window this count of an accepted prompt disproved (0: none). None in
    # lessons stored before lifts were recorded: readers lift as the rule was then,
    # any learned window below a count the provider accepted.
    lifted_window_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "estimated_tokens": self.estimated_tokens,
            "provider_tokens": self.provider_tokens,
            "calibration": self.calibration,
            "source": self.source,
            "lifted_window_tokens": self.lifted_window_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TokenLesson:
        return cls(
            data["model"],
            data["estimated_tokens"],
            data["provider_tokens"],
            data["calibration"],
            data["source"],
            data.get("lifted_window_tokens"),
        )


@dataclass(frozen=True, slots=True)
class WindowLesson:
    """The provider said its window for ``model`` is ``window_tokens`` (0: it did not
    say), and that the request asked ``output_tokens`` for the answer (0: not said)."""

    model: str
    window_tokens: int
    output_tokens: int
    source: str
    # The error stated the window. False: inferred from the refused prompt's size, or
    # stored before the kind was recorded (a usage report above either lifts it, as
    # one lifted every learned window then).
    stated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "window_tokens": self.window_tokens,
            "output_tokens": self.output_tokens,
            "source": self.source,
            "stated": self.stated,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WindowLesson:
        return cls(
            data["model"],
            data["window_tokens"],
            data["output_tokens"],
            data["source"],
            data.get("stated", False),
        )


@dataclass(frozen=True, slots=True)
class ByteLesson:
    """The provider refused a request of ``request_bytes`` for ``model`` for its size:
    the store's measure of the view it served (messages, system prompt and tools as
    rendered in the client's format)."""

    model: str
    request_bytes: int
    # "<provider> refused a request of N bytes as sent (the store renders the view at
    # version V in M): <its words>", or, the client sending no figure, "... of N bytes
    # as the store rendered it (view at version V): ...".
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "request_bytes": self.request_bytes, "source": self.source}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ByteLesson:
        return cls(data["model"], data["request_bytes"], data["source"])


def learn_bytes(model: str, request_bytes: int, source: str) -> ByteLesson | None:
    """The lesson of a request refused for its bytes (None when unmeasured)."""
    if request_bytes <= 0:
        return None
    return ByteLesson(model, request_bytes, source[:MAX_SOURCE_CHARS])


def learn_tokens(
    current: float | None,
    model: str,
    estimated_tokens: int,
    provider_tokens: int,
    source: str,
    *,
    lifted_window_tokens: int = 0,
) -> TokenLesson | None:
    """The lesson of one provider count (None when it teaches nothing): ``current`` is
    the session's calibration for the model so far (None: never calibrated). A count
    above it is adopted whole, one below moves it ``LOWER_LESSON_WEIGHT`` of the way
    down: undercounting overflows the window, overcounting only costs room.
    ``lifted_window_tokens``: the inferred window the count disproves (see
    ``LearnedLimits.disproved_by``)."""
    if estimated_tokens < MIN_LESSON_TOKENS or provider_tokens <= 0:
        return None
    ratio = min(MAX_CALIBRATION, max(MIN_CALIBRATION, provider_tokens / estimated_tokens))
    if current is None or ratio >= current:
        calibrated = ratio
    else:
        calibrated = current - LOWER_LESSON_WEIGHT * (current - ratio)
    return TokenLesson(
        model,
        estimated_tokens,
        provider_tokens,
        round(calibrated, 4),
        source[:MAX_SOURCE_CHARS],
        lifted_window_tokens,
    )


# Whatever a provider's answer can teach about a model.
Lesson = TokenLesson | WindowLesson | ByteLesson


@dataclass(frozen=True, slots=True)
class LearnedLimits:
    """What the lessons taught about one model, as every reader folds them."""

    calibration: float | None = None
    # The window in force learned from overflow errors (0: none), stated or inferred.
    window_tokens: int = 0
    output_tokens: int = 0
    # The smallest request the provider refused for its bytes (0: none).
    request_bytes: int = 0
    # The smallest window an error stated (0: none, or none recorded as stated): what
    # is in force once an inferred window below it is lifted. window_tokens is never
    # above it.
    stated_window_tokens: int = 0

    def after(self, lesson: Lesson, *, accepted: bool = False) -> LearnedLimits:
        """After any lesson; ``accepted`` says whether a token count was of a prompt
        the provider accepted (usage) or refused (an overflow)."""
        if isinstance(lesson, TokenLesson):
            return self.after_tokens(lesson, accepted=accepted)
        if isinstance(lesson, WindowLesson):
            return self.after_window(lesson)
        return self.after_bytes(lesson)

    def after_tokens(self, lesson: TokenLesson, *, accepted: bool) -> LearnedLimits:
        """After a count of a prompt the provider ``accepted`` (usage) or refused (an
        overflow), lifting the inferred window it records it disproved. A lesson stored
        before lifts were recorded lifts as the rule was then: any learned window below
        the count of a prompt the provider accepted."""
        after = replace(self, calibration=lesson.calibration)
        if lesson.lifted_window_tokens is None:
            if accepted and self.window_tokens and lesson.provider_tokens > self.window_tokens:
                return replace(after, window_tokens=0, stated_window_tokens=0)
            return after
        if lesson.lifted_window_tokens:
            return replace(after, window_tokens=self.stated_window_tokens)
        return after

    def disproved_by(self, accepted_tokens: int) -> int:
        """The window a prompt of ``accepted_tokens`` the provider accepted disproves
        (0: none): the one in force, when it is larger than it and was inferred (no
        error stated it). An inferred window only bounds the provider's from one
        refusal, which the answer's room may have caused; a stated one is the
        provider's own word, kept until the client says otherwise."""
        if self.window_inferred and accepted_tokens > self.window_tokens:
            return self.window_tokens
        return 0

    def after_window(self, lesson: WindowLesson) -> LearnedLimits:
        window = _smaller(self.window_tokens, lesson.window_tokens)
        stated = self.stated_window_tokens
        if lesson.stated:
            stated = _smaller(stated, lesson.window_tokens)
        output = max(self.output_tokens, lesson.output_tokens)
        return replace(
            self, window_tokens=window, output_tokens=output, stated_window_tokens=stated
        )

    def after_bytes(self, lesson: ByteLesson) -> LearnedLimits:
        """After a request refused for its bytes: the smallest such request bounds the
        limit. Nothing the store sees disproves it (a usage report counts tokens, not
        the request's bytes), so it stays for the model until the client has the
        session forget it."""
        refused = lesson.request_bytes
        if self.request_bytes:
            refused = min(refused, self.request_bytes)
        return replace(self, request_bytes=refused)

    def without_window(self) -> LearnedLimits:
        """After the client set the window itself: the window it set is in force, not
        the one an earlier overflow error stated (the calibration and the answer's room
        are the provider's own counts, and stay)."""
        return replace(self, window_tokens=0, stated_window_tokens=0)

    def forgotten(self) -> LearnedLimits:
        """After the client had the session forget what overflow errors taught: their
        windows, the answer's room they stated and the limits in bytes go, as they may
        be stale (a proxy's limit raised, the model moved to a larger deployment) or
        never true (a misread error). The calibration stays: it is no limit, but the
        provider's count per store token, which every usage report corrects anyway;
        forgetting it would count the next views at 1.0, too low for a provider that
        counts more (Claude's 1.15-1.3x), and overflow the window just restored."""
        return LearnedLimits(calibration=self.calibration)

    @property
    def holds_a_limit(self) -> bool:
        """Whether an overflow error taught a limit (what forgetting would drop)."""
        return bool(self.window_tokens or self.output_tokens or self.request_bytes)

    @property
    def window_inferred(self) -> bool:
        """Whether the window in force was inferred (no error stated it)."""
        return bool(self.window_tokens) and self.window_tokens != self.stated_window_tokens

    def window(self, resolved_tokens: int) -> int:
        """The window in force: the resolved one, or the learned one when smaller."""
        if self.window_tokens and self.window_tokens < resolved_tokens:
            return self.window_tokens
        return resolved_tokens

    @property
    def request_bytes_allowed(self) -> int:
        """The most a view's rendered request may take, in bytes (0: no limit learned)."""
        return math.floor(self.request_bytes * REQUEST_BYTES_SHARE)

    def to_list(self) -> list[Any]:
        return [
            self.calibration,
            self.window_tokens,
            self.output_tokens,
            self.request_bytes,
            self.stated_window_tokens,
        ]

    @classmethod
    def from_list(cls, data: list[Any]) -> LearnedLimits:
        # Rows stored before byte limits were learned hold three figures, those stored
        # before stated windows were told from inferred ones four.
        return cls(*data[:5])


def _smaller(learned: int, taught: int) -> int:
    """The smaller of two windows, 0 being none."""
    if learned and taught:
        return min(learned, taught)
    return learned or taught
