"""Anthropic Messages: what ``system`` and ``messages`` must be.

- ``system`` is absent or a list of non-blank text blocks.
- Messages alternate user and assistant, the first the user's (or the
  assistant's, when it opens with a signed compaction block, which no message
  may come before); each holds a non-empty list of content blocks.
- Text blocks are not blank; thinking carries its signature.
- A ``tool_use`` (id ``^[a-zA-Z0-9_-]{1,64}$``, unique) is answered by a
  ``tool_result`` in the very next message, which is the user's; a user
  message's tool results answer calls of the assistant message just before it,
  each once, and come before any other block of that message.
- Blocks are those each side takes: the user's text, image, document,
  search_result and tool_result; the assistant's text, thinking,
  redacted_thinking, tool_use, compaction and server tools' blocks.
"""

from __future__ import annotations

from typing import Any

from projections.provider_rules._checks import call_id_problem, text_problem

NAME = "anthropic"
_USER_BLOCKS = {"text", "image", "document", "search_result", "tool_result"}
_ASSISTANT_BLOCKS = {
    "text",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
    "compaction",
}
_RESULT_BLOCKS = {"text", "image", "document", "search_result"}


def validate(request: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    system = request.get("system")
    if system is not None:
        if not isinstance(system, list):
            problems.append("system must be a list of text blocks")
        else:
            for i, block in enumerate(system):
                if not isinstance(block, dict) or block.get("type") != "text":
                    problems.append(f"system[{i}] must be a text block")
                elif problem := text_problem(f"system[{i}]", block.get("text")):
                    problems.append(problem)
    messages = request.get("messages")
    if not isinstance(messages, list):
        return [*problems, "messages must be a list"]
    waiting: set[str] = set()
    seen: set[str] = set()
    turns = ("assistant", "user") if _opens_with_signed_block(messages) else ("user", "assistant")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        role = message.get("role") if isinstance(message, dict) else None
        expected = turns[index % 2]
        if role != expected:
            problems.append(f"{where}: role {role!r} where the turns want {expected!r}")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list) or not content:
            problems.append(f"{where}: content must be a non-empty list of blocks")
            waiting = set()
            continue
        for at, block in enumerate(content):
            if _signed_block(block) and (index, at) != (0, 0):
                problems.append(f"{where}: a signed compaction block must open the messages")
        if role == "assistant":
            if waiting:
                problems.append(f"{where} comes before the results of {sorted(waiting)}")
            waiting = _assistant(where, content, seen, problems)
        else:
            _user(where, content, waiting, problems)
            waiting = set()
    if waiting:
        problems.append(f"the messages end before the results of {sorted(waiting)}")
    for index, tool in enumerate(request.get("tools") or []):
        if not isinstance(tool, dict) or not isinstance(tool.get("input_schema"), dict):
            problems.append(f"tools[{index}] needs an input_schema object")
    return problems


def _assistant(where: str, content: list[Any], seen: set[str], problems: list[str]) -> set[str]:
    calls: set[str] = set()
    for i, block in enumerate(content):
        at = f"{where}.content[{i}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in _ASSISTANT_BLOCKS:
            problems.append(f"{at}: the assistant's turn takes no {kind!r} block")
        elif kind == "text" and (problem := text_problem(at, block.get("text"))):
            problems.append(problem)
        elif kind == "thinking" and not block.get("signature"):
            problems.append(f"{at}: thinking goes back only with its signature")
        elif kind == "tool_use":
            call_id = block.get("id")
            if problem := call_id_problem(at, call_id, NAME):
                problems.append(problem)
            if call_id in seen:
                problems.append(f"{at}: tool_use id {call_id!r} is used twice")
            seen.add(call_id)
            calls.add(call_id)
            if not isinstance(block.get("input"), dict):
                problems.append(f"{at}: input must be an object")
    return calls


def _user(where: str, content: list[Any], waiting: set[str], problems: list[str]) -> None:
    answered: set[str] = set()
    other_seen = False
    for i, block in enumerate(content):
        at = f"{where}.content[{i}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in _USER_BLOCKS:
            problems.append(f"{at}: the user's turn takes no {kind!r} block")
            continue
        if kind != "tool_result":
            other_seen = True
            if kind == "text" and (problem := text_problem(at, block.get("text"))):
                problems.append(problem)
            continue
        if other_seen:
            problems.append(f"{at}: tool results come before any other block")
        call_id = block.get("tool_use_id")
        if call_id not in waiting or call_id in answered:
            problems.append(f"{at} answers {call_id!r}, no tool_use just before it waiting")
        answered.add(call_id)
        result = block.get("content", "")
        if isinstance(result, list):
            for j, part in enumerate(result):
                if not isinstance(part, dict) or part.get("type") not in _RESULT_BLOCKS:
                    problems.append(f"{at}.content[{j}] is no block a tool result takes")
        elif not isinstance(result, str):
            problems.append(f"{at}: content must be text or blocks")
    missing = waiting - answered
    if missing:
        problems.append(f"{where} lacks the results of {sorted(missing)}")


def _opens_with_signed_block(messages: list[Any]) -> bool:
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    content = first.get("content")
    return isinstance(content, list) and bool(content) and _signed_block(content[0])


def _signed_block(block: Any) -> bool:
    """A compaction block compacted on demand: signed, it must open the messages."""
    return isinstance(block, dict) and block.get("type") == "compaction" and "signature" in block
