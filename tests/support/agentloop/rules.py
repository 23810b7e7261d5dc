"""What OpenAI's and Anthropic's APIs refuse in a request, with the errors they answer.

The provider stand-in checks every request the agent sends against these
rules, written from the providers' documentation and the 400 errors they
return (messages quoted as the APIs word them), and independent of the
store's renderer: a view the store renders wrong fails here as it would
against the real API.
"""

from __future__ import annotations

import re
from typing import Any

# Anthropic's pattern for tool_use ids; OpenAI's limit on tool call ids.
ANTHROPIC_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
OPENAI_TOOL_ID_MAX = 40


class Refused(Exception):
    """The request breaks a rule; the message is the provider's."""


def check_openai_chat(body: dict[str, Any]) -> None:
    """Raises :class:`Refused` as ``POST /v1/chat/completions`` would answer 400."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Refused("[] is too short - 'messages'")
    _check_openai_tools(body.get("tools"))
    waiting: list[str] = []  # the calls of the last assistant message not yet answered
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting:
                raise Refused(
                    f"Invalid parameter: messages with role 'tool' must be a response to a "
                    f"preceeding message with 'tool_calls'. (messages[{i}], {call_id!r})"
                )
            waiting.remove(call_id)
            _check_openai_content(message.get("content"), i, allow_parts=("text",))
            continue
        if waiting:
            raise Refused(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(waiting)}"
            )
        if role in ("system", "developer"):
            _check_openai_content(message.get("content"), i, allow_parts=("text",))
        elif role == "user":
            _check_openai_content(message.get("content"), i, allow_parts=("text", "image_url"))
        elif role == "assistant":
            waiting = _openai_calls(message, i)
            if message.get("content") is None and not waiting:
                raise Refused(
                    f"Invalid value for 'content': expected a string, got null. (messages[{i}])"
                )
            if message.get("content") is not None:
                _check_openai_content(message["content"], i, allow_parts=("text", "refusal"))
        else:
            raise Refused(
                f"Invalid value: {role!r}. Supported values are: 'system', 'assistant', "
                f"'user', 'tool', 'function' and 'developer'. (messages[{i}].role)"
            )
    if waiting:
        raise Refused(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(waiting)}"
        )


def _openai_calls(message: dict[str, Any], i: int) -> list[str]:
    calls = message.get("tool_calls")
    if calls is None:
        return []
    if not isinstance(calls, list) or not calls:
        raise Refused(f"[] is too short - 'messages.{i}.tool_calls'")
    ids = []
    for call in calls:
        function = call.get("function") or {}
        call_id = call.get("id")
        if call.get("type") != "function" or not isinstance(function.get("name"), str):
            raise Refused(f"Missing required parameter: 'messages[{i}].tool_calls[0].function'.")
        if not isinstance(call_id, str) or not call_id or len(call_id) > OPENAI_TOOL_ID_MAX:
            raise Refused(
                f"Invalid 'messages[{i}].tool_calls[0].id': string too long. Expected a string "
                f"with maximum length {OPENAI_TOOL_ID_MAX}."
            )
        if not isinstance(function.get("arguments"), str):
            raise Refused(f"Invalid type for 'messages[{i}].tool_calls[0].function.arguments'")
        ids.append(call_id)
    return ids


def _check_openai_content(content: Any, i: int, allow_parts: tuple[str, ...]) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list) or not content:
        raise Refused(f"Invalid 'messages[{i}].content': empty array or not a string.")
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allow_parts:
            raise Refused(f"Invalid value: {kind!r} in 'messages[{i}].content'.")
        if kind == "text" and not isinstance(part.get("text"), str):
            raise Refused(f"Missing required parameter: 'messages[{i}].content[0].text'.")


def _check_openai_tools(tools: Any) -> None:
    for tool in tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            raise Refused("Missing required parameter: 'tools[0].function'.")
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", str(function.get("name", ""))):
            raise Refused("Invalid 'tools[0].function.name': string does not match pattern.")


def check_anthropic_messages(body: dict[str, Any]) -> None:
    """Raises :class:`Refused` as ``POST /v1/messages`` would answer 400.

    Consecutive messages of one role are combined into one turn, as the API does,
    before the turns are checked (tool results first in the turn after the calls)."""
    if not isinstance(body.get("max_tokens"), int):
        raise Refused("max_tokens: Field required")
    _check_anthropic_system(body.get("system"))
    for tool in body.get("tools") or []:
        if not isinstance(tool.get("input_schema"), dict) or not tool.get("name"):
            raise Refused("tools.0.input_schema: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Refused("messages: at least one message is required")
    if messages[0].get("role") != "user":
        raise Refused('messages: first message must use the "user" role')
    previous_calls: set[str] = set()
    for i, (role, blocks) in enumerate(_turns(messages)):
        if role == "assistant":
            for j, block in enumerate(blocks):
                if block["type"] == "tool_result":
                    raise Refused(f"messages.{i}.content.{j}: tool_result in an assistant turn")
            calls = {b["id"] for b in blocks if b["type"] == "tool_use"}
            for call_id in calls:
                if not ANTHROPIC_TOOL_ID.match(call_id):
                    raise Refused(
                        f"messages.{i}.content: tool_use.id: String should match pattern "
                        f"'{ANTHROPIC_TOOL_ID.pattern}'"
                    )
            previous_calls = calls
            continue
        results = [b for b in blocks if b["type"] == "tool_result"]
        answered = {b.get("tool_use_id") for b in results}
        unexpected = answered - previous_calls
        if unexpected:
            raise Refused(
                f"messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {', '.join(sorted(map(str, unexpected)))}. Each `tool_result` block "
                "must have a corresponding `tool_use` block in the previous message."
            )
        missing = previous_calls - answered
        if missing:
            raise Refused(
                f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(sorted(missing))}. Each `tool_use` block must "
                "have a corresponding `tool_result` block in the next message."
            )
        if results and any(b["type"] == "tool_result" for b in blocks[len(results) :]):
            raise Refused(f"messages.{i}: tool_result blocks must come first in the content")
        previous_calls = set()
    if previous_calls:
        raise Refused(
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` "
            f"blocks immediately after: {', '.join(sorted(previous_calls))}. Each `tool_use` "
            "block must have a corresponding `tool_result` block in the next message."
        )


def _turns(messages: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The conversation's turns: the API combines consecutive messages of one role into one."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise Refused(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        blocks = _anthropic_blocks(message.get("content"), i)
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((str(role), list(blocks)))
    return turns


def _check_anthropic_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise Refused("system: Input should be a valid list")
    for j, block in enumerate(system):
        if block.get("type") != "text" or not str(block.get("text", "")).strip():
            raise Refused(f"system.{j}: text content blocks must contain non-whitespace text")


def _anthropic_blocks(content: Any, i: int) -> list[dict[str, Any]]:
    if isinstance(content, str):
        if not content.strip():
            raise Refused(f"messages.{i}: text content blocks must contain non-whitespace text")
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise Refused(f"messages.{i}: all messages must have non-empty content")
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            if not str(block.get("text", "")).strip():
                raise Refused(
                    f"messages.{i}.content.{j}: text content blocks must contain "
                    "non-whitespace text"
                )
        elif kind == "tool_use":
            if not isinstance(block.get("input"), dict) or not block.get("name"):
                raise Refused(f"messages.{i}.content.{j}.tool_use.input: Field required")
        elif kind == "tool_result":
            _check_result_content(block.get("content"), i, j)
        elif kind in ("thinking", "redacted_thinking"):
            if kind == "thinking" and not block.get("signature"):
                raise Refused(f"messages.{i}.content.{j}.thinking.signature: Field required")
        elif kind not in ("image", "document"):
            raise Refused(f"messages.{i}.content.{j}: Input tag {kind!r} does not match")
    return content


def _check_result_content(content: Any, i: int, j: int) -> None:
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise Refused(f"messages.{i}.content.{j}.tool_result.content: Input should be a list")
    for block in content:
        if block.get("type") not in ("text", "image", "document"):
            raise Refused(f"messages.{i}.content.{j}.tool_result.content: invalid block")
