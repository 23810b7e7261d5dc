"""What the entries say, gathered in one pass for the summary's sections.

Two kinds of facts are told apart. What the *user* said - their instructions,
the identifiers they named, the errors they reported - must survive every
roll, so it is gathered whole from the user's own words. Everything else
(what tools printed, the identifiers in their outputs, the assistant's
remarks) is incidental: kept while there is room, newest first. Text a user
pastes between code fences is output, not their words: its identifiers are
incidental, its first and last error lines are reported errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from domain.content import Entry, Role, TextBlock, ToolCall, ToolResult
from domain.context.summary.identifiers import find_identifiers
from domain.context.summary.layout import ITEM_CHARS, clip, renew
from domain.context.summary.patterns import (
    CONSTRAINT,
    DECISION,
    FENCE,
    INSTRUCTION,
    TAG,
    Phrases,
    clean,
    error_line,
    first_line,
    instructions_among,
    pasted_errors,
    sentences,
    stated_errors,
)

_ARG_PATH_KEYS = ("path", "file_path", "filePath", "file", "filename", "notebook_path", "cwd")
_ARG_COMMAND_KEYS = ("command", "cmd", "script")
_ARG_OTHER_KEYS = ("pattern", "query", "url", "name", "id")
# Identifiers worth keeping from what tools print: distinctive ones. Names and numbers
# in a tool's output are mostly the output itself (code, timings), not facts.
_DISTINCT = frozenset({"url", "email", "ticket", "id", "hash", "host", "version"})
# From what the assistant (or a note) writes: those and paths and code names; its
# numbers, type names and quotes are its prose.
_PROSE = _DISTINCT | {"path", "name"}
# Where a tool output's facts are: its head and its tail (the error, the totals).
_OUTPUT_EDGE_CHARS = 1_000
_PER_OUTPUT = 8
# How much of an assistant's or a note's text is read for decisions and identifiers.
_PROSE_CHARS = 4_000


@dataclass
class Call:
    entry_id: str
    name: str
    key: str
    outcome: str = "no result"
    result_entry: str = ""
    first_line: str = ""


@dataclass
class Facts:
    first_request: str = ""
    latest_request: str = ""
    latest_request_answered: bool = False
    # A brief reply after the latest request ("ok, do it"), if any.
    last_user_words: str = ""
    # How many calls were made before the latest request: later ones may still be pending.
    calls_before_latest_request: int = 0
    # The user's own words, each with the entry (or kind) of its latest mention, oldest first.
    instructions: dict[str, str] = field(default_factory=dict)  # sentence -> entry id
    named: dict[str, str] = field(default_factory=dict)  # identifier -> kind
    reported_errors: dict[str, str] = field(default_factory=dict)  # message -> entry id
    # Incidental facts. Constraints, decisions and commands are kept each once, in order of
    # first mention: dicts as ordered sets, since a long history holds thousands of them and
    # a list's membership test would read them all for each new one.
    constraints: dict[str, None] = field(default_factory=dict)
    decisions: dict[str, None] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    last_reply: str = ""
    files: dict[str, str] = field(default_factory=dict)  # path -> latest entry mentioning it
    identifiers: dict[str, str] = field(default_factory=dict)  # identifier -> kind
    commands: dict[str, None] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (message, entry id)

    def known(self) -> dict[str, str]:
        """Every identifier gathered, with its kind: what anonymisation replaces."""
        return {**{p: "path" for p in self.files}, **self.identifiers, **self.named}


def _wide(text: str) -> str:
    """``text`` clipped to twice a summary line: the line is clipped again once its
    identifiers are anonymised, so that no identifier is cut in half and left partly
    readable."""
    return clip(text, 2 * ITEM_CHARS)


def _add(items: dict[str, None], item: str) -> None:
    """Adds ``item`` unless it is empty or there already (where it stays)."""
    if item:
        items.setdefault(item)


def _texts(entry: Entry) -> str:
    return " ".join(b.text for b in entry.content if isinstance(b, TextBlock))


def _call_key(call: ToolCall) -> tuple[str, list[str], str, list[str]]:
    """The call's key argument (path, command or pattern), its paths, its command, and its
    other arguments."""
    try:
        arguments = json.loads(call.arguments_json)
    except ValueError:
        arguments = {}
    if not isinstance(arguments, dict):
        arguments = {}
    paths = [v for k in _ARG_PATH_KEYS if isinstance(v := arguments.get(k), str) and v]
    commands = [v for k in _ARG_COMMAND_KEYS if isinstance(v := arguments.get(k), str) and v]
    others = [v for k in _ARG_OTHER_KEYS if isinstance(v := arguments.get(k), str) and v]
    key = (paths or commands or others or [""])[0]
    command = clip(commands[0], 160) if commands else ""
    return clip(" ".join(key.split()), 120), paths, command, others


def gather(entries: Sequence[Entry]) -> Facts:
    facts = Facts()
    calls: dict[str, Call] = {}
    for entry in entries:
        if entry.role is Role.USER:
            _user(facts, entry)
        elif entry.role is Role.ASSISTANT:
            text = _texts(entry).strip()
            if text:
                facts.last_reply = _wide(clean(text))
                facts.latest_request_answered = True
            _prose(facts, entry, text[:_PROSE_CHARS], DECISION, facts.decisions)
            for call in entry.tool_calls:
                key, paths, command, others = _call_key(call)
                record = Call(entry.id, call.name, key)
                calls[call.id] = record
                facts.calls.append(record)
                for path in paths:
                    renew(facts.files, path, entry.id)
                if command:
                    _add(facts.commands, command)
                _incidental(facts, " ".join(others)[:_OUTPUT_EDGE_CHARS], _DISTINCT)
        elif entry.role is Role.TOOL:
            for result in entry.tool_results:
                _record_result(facts, calls.get(result.tool_call_id), entry, result)
        elif entry.role is Role.CUSTOM:
            _prose(facts, entry, _texts(entry)[:_PROSE_CHARS], CONSTRAINT, facts.constraints)
    return facts


def _user(facts: Facts, entry: Entry) -> None:
    raw = _texts(entry)
    text = clean(raw)
    if text and _is_brief(text) and facts.latest_request:
        # "ok", "yes", "go on": an answer to the agent, not a new request.
        facts.last_user_words = _wide(text)
    elif text:
        if not facts.first_request or _is_command(facts.first_request):
            facts.first_request = _wide(text)
        facts.latest_request = _wide(text)
        facts.last_user_words = ""
        facts.latest_request_answered = False
        facts.calls_before_latest_request = len(facts.calls)
    prose = TAG.sub(" ", FENCE.sub(" ", raw))
    # Split once: the instructions and the preferences below are read from the same sentences.
    parts = sentences(prose)
    for sentence in instructions_among(parts):
        renew(facts.instructions, sentence, entry.id)
    errors = stated_errors(prose)
    for error in errors:
        renew(facts.reported_errors, error, entry.id)
    for found in find_identifiers(prose):
        # An identifier inside an error the user reported is the error's, kept with it.
        if any(found.value in error for error in errors):
            continue
        renew(facts.named, found.value, found.kind)
        if found.kind == "path":
            renew(facts.files, found.value, entry.id)
    for pasted in FENCE.findall(raw):
        for error in pasted_errors(pasted):
            renew(facts.reported_errors, error, entry.id)
        _incidental(facts, _edges(pasted), _DISTINCT, _PER_OUTPUT)
    # What the user prefers without an explicit instruction ("only", "prefer", "avoid").
    head = parts if len(prose) <= _PROSE_CHARS else sentences(prose[:_PROSE_CHARS])
    for sentence in head:
        explicit = INSTRUCTION.search(sentence)
        if _is_sentence(sentence) and not explicit and CONSTRAINT.search(sentence):
            _add(facts.constraints, _wide(sentence))


def _is_brief(text: str) -> bool:
    return len(text) < 20 and len(text.split()) <= 3


def _is_command(text: str) -> bool:
    """A bare slash command (``/mode``, ``/init``) is not a statement of the goal."""
    return text.startswith("/") and len(text.split()) <= 2


def _is_sentence(sentence: str) -> bool:
    # A sentence ending in a colon introduces something else; alone it says nothing.
    return 12 <= len(sentence) <= 400 and not sentence.endswith(":")


def _prose(facts: Facts, entry: Entry, text: str, pattern: Phrases, into: dict[str, None]) -> None:
    """Sentences matching ``pattern`` go to ``into``; paths and identifiers to the facts."""
    prose = FENCE.sub(" ", text)
    for sentence in sentences(prose):
        if _is_sentence(sentence) and pattern.search(sentence):
            _add(into, _wide(sentence))
    for found in find_identifiers(text, _PROSE):
        if found.kind == "path":
            renew(facts.files, found.value, entry.id)
        else:
            renew(facts.identifiers, found.value, found.kind)


def _incidental(facts: Facts, text: str, kinds: frozenset[str], limit: int | None = None) -> None:
    """Identifiers of ``kinds`` in ``text`` (at most ``limit``), unless the user named them."""
    found = {f.value: f.kind for f in find_identifiers(text, kinds) if f.value not in facts.named}
    for value, kind in list(found.items())[:limit]:
        renew(facts.identifiers, value, kind)


def _edges(output: str) -> str:
    """The head and the tail of an output: where its facts are."""
    if len(output) <= 2 * _OUTPUT_EDGE_CHARS:
        return output
    return f"{output[:_OUTPUT_EDGE_CHARS]}\n{output[-_OUTPUT_EDGE_CHARS:]}"


def _record_result(facts: Facts, call: Call | None, entry: Entry, result: ToolResult) -> None:
    text = result.content
    stripped = text.lstrip()
    failed = result.is_error or bool(
        stripped.startswith("{") and re.search(r'"status"\s*:\s*"error"', text[:500])
    )
    if call is None:
        call = Call(entry.id, entry.metadata.get("toolName", "") or "tool", "")
        facts.calls.append(call)
    call.result_entry = entry.id
    call.outcome = "error" if failed else "ok"
    call.first_line = error_line(text) if failed else first_line(text)
    if failed:
        facts.errors.append((call.first_line, entry.id))
    _incidental(facts, f"{call.first_line}\n{_edges(text)}", _DISTINCT, _PER_OUTPUT)
    if call.key in facts.files:
        renew(facts.files, call.key, entry.id)
