"""OpenAI Responses: what an ``input`` list (and ``instructions``) must be.

- ``instructions`` is a string, or absent.
- A message item has role user, assistant, system or developer and content (a
  string, or parts: input_text, input_image, input_file for user and system
  messages; output_text for the assistant's).
- Every ``function_call`` (``call_id`` in the form ``^[A-Za-z0-9_-]{1,64}$``,
  ``name``, ``arguments`` as a JSON string) is answered by exactly one
  ``function_call_output`` before any item other than calls and outputs.
- A ``function_call_output`` answers a call still waiting; its output is a string
  or a list of input_text, input_image and input_file parts.
- A ``reasoning`` item is followed by an item of the turn it reasoned about (an
  assistant message, a call, another item of the model's), never by the user's
  input, a call's output or the end of the input.
- A ``compaction`` item carries its ``encrypted_content``.
"""

from __future__ import annotations

from typing import Any

from projections.provider_rules._checks import call_id_problem, text_problem

NAME = "openai-responses"
_ROLES = {"user", "assistant", "system", "developer"}
_INPUT_PARTS = {"input_text", "input_image", "input_file"}
_OUTPUT_PARTS = {"output_text", "refusal"}
# Items of the user's side: none of them may follow a reasoning item.
_NOT_AFTER_REASONING = {"function_call_output", "compaction"}


def validate(request: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    instructions = request.get("system")
    if instructions is not None and not isinstance(instructions, str):
        problems.append("instructions must be a string")
    items = request.get("messages")
    if not isinstance(items, list):
        return ["input must be a list"]
    waiting: set[str] = set()
    answered: set[str] = set()
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            problems.append(f"{where} is not an object")
            continue
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in ("function_call", "function_call_output") and waiting:
            problems.append(f"{where} ({kind}) comes before the outputs of {sorted(waiting)}")
            waiting = set()
        if kind == "reasoning":
            following = items[index + 1] if index + 1 < len(items) else None
            if following is None or _is_users(following):
                problems.append(f"{where}: a reasoning item without its following item")
        match kind:
            case "message":
                problems += _message(where, item)
            case "function_call":
                problem = call_id_problem(where, item.get("call_id"), NAME)
                if problem:
                    problems.append(problem)
                if item.get("call_id") in waiting | answered:
                    problems.append(f"{where}: call_id {item.get('call_id')!r} is used twice")
                waiting.add(str(item.get("call_id")))
                if not isinstance(item.get("name"), str) or not item.get("name"):
                    problems.append(f"{where}: a function call needs a name")
                if not isinstance(item.get("arguments"), str):
                    problems.append(f"{where}: arguments must be a JSON string")
            case "function_call_output":
                call_id = item.get("call_id")
                if call_id not in waiting:
                    problems.append(f"{where} answers {call_id!r}, no call waiting for it")
                waiting.discard(call_id)
                answered.add(str(call_id))
                problems += _output(where, item.get("output"))
            case "compaction":
                if not isinstance(item.get("encrypted_content"), str):
                    problems.append(f"{where}: a compaction item carries its encrypted_content")
            case str():
                pass  # the provider's own items (reasoning, hosted tools' calls), verbatim
            case _:
                problems.append(f"{where}: an item needs a type or a role")
    if waiting:
        problems.append(f"the input ends before the outputs of {sorted(waiting)}")
    for index, tool in enumerate(request.get("tools") or []):
        if not isinstance(tool, dict) or tool.get("type") != "function" or "strict" not in tool:
            problems.append(f"tools[{index}] must be a function tool with strict set")
    return problems


def _is_users(item: Any) -> bool:
    if not isinstance(item, dict):
        return True
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return item.get("role") != "assistant"
    return kind in _NOT_AFTER_REASONING


def _message(where: str, item: dict[str, Any]) -> list[str]:
    role = item.get("role")
    if role not in _ROLES:
        return [f"{where}: unknown role {role!r}"]
    content = item.get("content")
    if isinstance(content, str):
        problem = text_problem(where, content, blank_ok=role == "assistant")
        return [problem] if problem else []
    if not isinstance(content, list) or not content:
        return [f"{where}: a message needs content"]
    allowed = _OUTPUT_PARTS if role == "assistant" else _INPUT_PARTS
    return [
        f"{where}.content[{i}] is no part a {role} message takes"
        for i, part in enumerate(content)
        if not isinstance(part, dict) or part.get("type") not in allowed
    ]


def _output(where: str, output: Any) -> list[str]:
    if isinstance(output, str):
        return []
    if not isinstance(output, list):
        return [f"{where}: output must be a string or a list of parts"]
    return [
        f"{where}.output[{i}] is no part an output takes"
        for i, part in enumerate(output)
        if not isinstance(part, dict) or part.get("type") not in _INPUT_PARTS
    ]
