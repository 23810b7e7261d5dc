"""OpenAI chat completions: what a ``messages`` array must be.

- Each message has a known role: system, developer, user, assistant, tool.
- An assistant message has text or tool calls (both may be); each call is
  ``{"id", "type": "function", "function": {"name", "arguments"}}`` with an id of
  at most 40 characters.
- Every call is answered by exactly one ``tool`` message, and those answers come
  right after the assistant message that made the calls, before anything else.
- A ``tool`` message answers a call of the assistant message just before it; its
  content is text (a string, or text parts).
- A user message's parts are text, image_url, input_audio or file.
"""

from __future__ import annotations

from typing import Any

from projections.provider_rules._checks import call_id_problem, text_problem

NAME = "openai"
_USER_PARTS = {"text", "image_url", "input_audio", "file"}


def validate(request: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    messages = request.get("messages")
    if not isinstance(messages, list):
        return ["messages must be a list"]
    waiting: set[str] = set()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            problems.append(f"{where} is not an object")
            continue
        role = message.get("role")
        if role != "tool" and waiting:
            problems.append(f"{where} ({role}) comes before the results of {sorted(waiting)}")
            waiting = set()
        match role:
            case "system" | "developer":
                problems += _text_content(where, message.get("content"))
            case "user":
                problems += _user_content(where, message.get("content"))
            case "assistant":
                waiting = _assistant(where, message, problems)
            case "tool":
                call_id = message.get("tool_call_id")
                if call_id not in waiting:
                    problems.append(
                        f"{where} answers {call_id!r}, not a call of the assistant message "
                        "before it still waiting"
                    )
                waiting.discard(call_id)
                problems += _text_content(where, message.get("content"), blank_ok=True)
            case _:
                problems.append(f"{where}: unknown role {role!r}")
    if waiting:
        problems.append(f"the messages end before the results of {sorted(waiting)}")
    problems += _tools(request.get("tools") or [])
    return problems


def _assistant(where: str, message: dict[str, Any], problems: list[str]) -> set[str]:
    content = message.get("content")
    calls = message.get("tool_calls") or []
    if content is None and not calls:
        problems.append(f"{where}: an assistant message needs content or tool_calls")
    if content is not None:
        problems += _text_content(where, content, blank_ok=True)
    ids: set[str] = set()
    for number, call in enumerate(calls):
        at = f"{where}.tool_calls[{number}]"
        if not isinstance(call, dict) or call.get("type") != "function":
            problems.append(f"{at} must be a function call")
            continue
        problem = call_id_problem(at, call.get("id"), NAME)
        if problem:
            problems.append(problem)
        if call.get("id") in ids:
            problems.append(f"{at}: id {call.get('id')!r} is used twice")
        ids.add(str(call.get("id")))
        function = call.get("function") or {}
        if not isinstance(function.get("name"), str) or not function.get("name"):
            problems.append(f"{at}: the function needs a name")
        if not isinstance(function.get("arguments"), str):
            problems.append(f"{at}: arguments must be a JSON string")
    return ids


def _text_content(where: str, content: Any, *, blank_ok: bool = False) -> list[str]:
    if isinstance(content, str):
        problem = text_problem(where, content, blank_ok=blank_ok)
        return [problem] if problem else []
    if isinstance(content, list) and content:
        return [
            f"{where}.content[{i}] must be a text part"
            for i, part in enumerate(content)
            if not isinstance(part, dict) or part.get("type") != "text"
        ]
    return [f"{where}: content must be text"]


def _user_content(where: str, content: Any) -> list[str]:
    if isinstance(content, str):
        problem = text_problem(where, content)
        return [problem] if problem else []
    if not isinstance(content, list) or not content:
        return [f"{where}: a user message needs content"]
    return [
        f"{where}.content[{i}] is no part a user message takes"
        for i, part in enumerate(content)
        if not isinstance(part, dict) or part.get("type") not in _USER_PARTS
    ]


def _tools(tools: list[Any]) -> list[str]:
    problems = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            problems.append(f"tools[{index}] must be a function tool")
        elif not isinstance(function.get("parameters", {}), dict):
            problems.append(f"tools[{index}]: parameters must be a JSON schema object")
    return problems
