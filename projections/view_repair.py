"""Tool calls paired with their results in a prompt view, whatever the log holds.

Every provider refuses a request where a tool call is not directly followed by
its result, or a result answers no call just before it. The store refuses to
write such a log, but logs still come out that way: a result retracted, calls
still open when a view is asked for, transcripts imported as they were, entries
stored before a rule existed. So each view is paired on its own, in one pass
that is the same for every format:

- a result is shown only right after its call (tool entries and the runtime's
  custom notes may lie between); any other result is left out (``dropped_result``);
- a call whose result has not come by the next entry of another kind, or by the
  end of the view, is answered by a synthetic error result (``synthetic_result``).

The durable log is never rewritten: the repairs belong to the view and are
reported with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from domain.content import Entry, Role, ToolCall, ToolResult

SYNTHETIC_RESULT_TEXT = (
    "[synthetic result] No result of this tool call is in the conversation: it never "
    "came, or was lost. Do not assume it ran."
)


@dataclass(frozen=True, slots=True)
class Repair:
    """One thing a view does differently from the log so its provider accepts it."""

    # "synthetic_result", "dropped_result", "leading_user_turn" or "call_id_rewritten".
    kind: str
    # The entry it concerns: the call's entry for a synthetic result, the result's
    # entry for a dropped one.
    entry_id: str = ""
    tool_call_id: str = ""
    # The id the view shows for a rewritten call id.
    view_tool_call_id: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PendingCall:
    call_id: str
    name: str
    entry_id: str


@dataclass(frozen=True, slots=True)
class Step:
    """What the pairing does around one entry."""

    # Calls to answer with a synthetic result before the entry is shown.
    synthetic_before: tuple[PendingCall, ...] = ()
    # Call ids of the entry's results that are left out.
    dropped: frozenset[str] = frozenset()
    # Call id -> name of the call each shown result answers.
    answered: dict[str, str] = field(default_factory=dict)


NOTHING = Step()
# Enum members read from module names: a class attribute lookup of an enum costs
# several times more, and the pass reads them for every entry of every view.
_TOOL, _CUSTOM, _ASSISTANT = Role.TOOL, Role.CUSTOM, Role.ASSISTANT


class Pairing:
    """The pass, fed one entry at a time in view order (so a view that only appends to
    an earlier one continues where that one stopped)."""

    def __init__(self, waiting: tuple[PendingCall, ...] = (), *, names: bool = False) -> None:
        # Calls made by the latest entry shown, waiting for their results: call id ->
        # (name, entry id). Plain tuples: this runs for every call of every view.
        self.pending: dict[str, tuple[str, str]] = {
            c.call_id: (c.name, c.entry_id) for c in waiting
        }
        self.repairs: list[Repair] = []
        # The calls still waiting at the end (their synthetic results end the view).
        self.pending_at_end: tuple[PendingCall, ...] = ()
        # Whether steps name the calls their results answer (Gemini's responses do).
        self._names = names

    @property
    def waited_at_end(self) -> bool:
        return bool(self.pending_at_end)

    def step(self, entry: Entry) -> Step:
        # Once per entry of every view rendered: the common cases allocate nothing.
        role = entry.role
        if role is _TOOL:
            return self._results(entry)
        if role is _CUSTOM:
            return NOTHING  # the runtime's notes are never sent
        synthetic = (
            self._answer_pending(f"{role.value} entry {entry.id} came first")
            if self.pending
            else ()
        )
        if role is _ASSISTANT:
            for block in entry.content:
                if type(block) is ToolCall:
                    self.pending[block.id] = (block.name, entry.id)
        return Step(synthetic) if synthetic else NOTHING

    def finish(self) -> tuple[PendingCall, ...]:
        """The calls still waiting at the end of the view, answered synthetically."""
        self.pending_at_end = self._answer_pending("the view ends before it")
        return self.pending_at_end

    def _results(self, entry: Entry) -> Step:
        dropped: set[str] | None = None
        answered: dict[str, str] | None = {} if self._names else None
        pending = self.pending
        for block in entry.content:
            if type(block) is not ToolResult:
                continue
            call = pending.pop(block.tool_call_id, None)
            if call is not None:
                if answered is not None:
                    answered[block.tool_call_id] = call[0]
                continue
            dropped = dropped or set()
            dropped.add(block.tool_call_id)
            self.repairs.append(
                Repair(
                    "dropped_result",
                    entry.id,
                    block.tool_call_id,
                    detail="its call is not right before it in the view (compacted away, "
                    "lost, or answered already)",
                )
            )
        if dropped is None and not answered:
            return NOTHING
        return Step(dropped=frozenset(dropped or ()), answered=answered or {})

    def _answer_pending(self, why: str) -> tuple[PendingCall, ...]:
        if not self.pending:
            return ()
        waiting = tuple(
            PendingCall(call_id, name, entry_id)
            for call_id, (name, entry_id) in self.pending.items()
        )
        self.pending = {}
        self.repairs.extend(
            Repair("synthetic_result", c.entry_id, c.call_id, detail=f"no result came: {why}")
            for c in waiting
        )
        return waiting


def synthetic_entry(calls: tuple[PendingCall, ...]) -> Entry:
    """The tool entry a view shows for calls that got no result."""
    return Entry(
        id=f"synthetic:{calls[0].call_id}",
        parent_id=calls[0].entry_id,
        timestamp=None,
        role=Role.TOOL,
        content=tuple(ToolResult(c.call_id, SYNTHETIC_RESULT_TEXT, True) for c in calls),
    )
