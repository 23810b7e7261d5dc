"""What the entries say: requests, constraints, decisions, tool calls and how they ended,
files, identifiers, commands and errors, gathered in one pass for the summary's sections."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from domain.content import Entry, Role, TextBlock, ToolCall, ToolResult
from domain.context.summary.layout import clip
from domain.context.summary.patterns import (
    BACKTICKED,
    BULLET,
    CODE_LIKE,
    CONSTRAINT,
    DECISION,
    FENCE,
    FUNCTION,
    HEX_ID,
    PATH,
    SENTENCE,
    clean,
    error_line,
    first_line,
)

_ARG_PATH_KEYS = ("path", "file_path", "filePath", "file", "filename", "notebook_path", "cwd")
_ARG_COMMAND_KEYS = ("command", "cmd", "script")
_ARG_OTHER_KEYS = ("pattern", "query", "url", "name", "id")


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
    constraints: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    last_reply: str = ""
    files: dict[str, str] = field(default_factory=dict)  # path -> latest entry mentioning it
    identifiers: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (message, entry id)


def _add(items: list[str], item: str) -> None:
    if item and item not in items:
        items.append(item)


def _texts(entry: Entry) -> list[str]:
    return [b.text for b in entry.content if isinstance(b, TextBlock)]


def _call_key(call: ToolCall) -> tuple[str, list[str], str]:
    """The call's key argument (path, command or pattern), its paths, and its command."""
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
    return clip(" ".join(key.split()), 120), paths, clip(commands[0], 160) if commands else ""


def gather(entries: Sequence[Entry]) -> Facts:
    facts = Facts()
    calls: dict[str, Call] = {}
    for entry in entries:
        if entry.role is Role.USER:
            text = clean(" ".join(_texts(entry)))
            if text and _is_brief(text) and facts.latest_request:
                # "ok", "yes", "go on": an answer to the agent, not a new request.
                facts.last_user_words = clip(text)
            elif text:
                if not facts.first_request or _is_command(facts.first_request):
                    facts.first_request = clip(text)
                facts.latest_request = clip(text)
                facts.last_user_words = ""
                facts.latest_request_answered = False
                facts.calls_before_latest_request = len(facts.calls)
            _scan(facts, entry, " ".join(_texts(entry))[:4_000], CONSTRAINT, facts.constraints)
        elif entry.role is Role.ASSISTANT:
            text = " ".join(_texts(entry)).strip()
            if text:
                facts.last_reply = clip(clean(text))
                facts.latest_request_answered = True
            _scan(facts, entry, text[:4_000], DECISION, facts.decisions)
            for call in entry.tool_calls:
                key, paths, command = _call_key(call)
                record = Call(entry.id, call.name, key)
                calls[call.id] = record
                facts.calls.append(record)
                for path in paths:
                    facts.files.pop(path, None)
                    facts.files[path] = entry.id
                if command:
                    _add(facts.commands, command)
        elif entry.role is Role.TOOL:
            for result in entry.tool_results:
                _record_result(facts, calls.get(result.tool_call_id), entry, result)
        elif entry.role is Role.CUSTOM:
            _scan(facts, entry, " ".join(_texts(entry))[:4_000], CONSTRAINT, facts.constraints)
    return facts


def _is_brief(text: str) -> bool:
    return len(text) < 20 and len(text.split()) <= 3


def _is_command(text: str) -> bool:
    """A bare slash command (``/mode``, ``/init``) is not a statement of the goal."""
    return text.startswith("/") and len(text.split()) <= 2


def _scan(facts: Facts, entry: Entry, text: str, pattern: re.Pattern[str], into: list[str]) -> None:
    """Sentences matching ``pattern`` go to ``into``; paths and names go to the facts."""
    for sentence in SENTENCE.split(FENCE.sub(" ", text)):
        sentence = BULLET.sub("", " ".join(sentence.split()))
        # A sentence ending in a colon introduces something else; alone it says nothing.
        if 12 <= len(sentence) <= 400 and not sentence.endswith(":") and pattern.search(sentence):
            _add(into, clip(sentence))
    for match in PATH.finditer(text):
        facts.files.pop(match.group(0), None)
        facts.files[match.group(0)] = entry.id
    for match in FUNCTION.finditer(text):
        if match.group(3):
            _add(facts.identifiers, f"{match.group(3)}()")
        elif match.group(2) or CODE_LIKE.search(match.group(1)):
            _add(facts.identifiers, match.group(1))
    for match in HEX_ID.finditer(text):
        _add(facts.identifiers, match.group(0))
    for match in BACKTICKED.finditer(text):
        if CODE_LIKE.search(match.group(1)) and not PATH.fullmatch(match.group(1)):
            _add(facts.identifiers, match.group(1))


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
    if call.key in facts.files:
        facts.files.pop(call.key)
        facts.files[call.key] = entry.id
