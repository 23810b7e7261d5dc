"""Google Gemini generateContent: what ``contents`` (and ``systemInstruction``) must be.

- ``systemInstruction`` is absent or ``{"parts": [...]}`` of text parts.
- Contents alternate user and model, the first the user's; each has a non-empty
  list of parts.
- A part holds one kind of data (text, inlineData, fileData, functionCall,
  functionResponse, executableCode, codeExecutionResult), beside which only
  ``thought`` and ``thoughtSignature`` may stand; a text is not empty.
- Function calls are the model's, function responses the user's: every call of a
  model turn is answered by one response, in the user turn right after it,
  matched by id (or, without ids, by name); no response answers anything else.
"""

from __future__ import annotations

from typing import Any

from projections.provider_rules._checks import call_id_problem

NAME = "gemini"
_DATA = {
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
}
_BESIDE = {"thought", "thoughtSignature", "partMetadata", "videoMetadata", "mediaResolution"}


def validate(request: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    instruction = request.get("system")
    if instruction is not None:
        parts = instruction.get("parts") if isinstance(instruction, dict) else None
        if not isinstance(parts, list) or not parts:
            problems.append("systemInstruction must be {parts: [...]}")
        else:
            problems += [
                f"systemInstruction.parts[{i}] must be text"
                for i, part in enumerate(parts)
                if not isinstance(part, dict) or not isinstance(part.get("text"), str)
            ]
    contents = request.get("messages")
    if not isinstance(contents, list):
        return [*problems, "contents must be a list"]
    waiting: list[tuple[str, str]] = []
    for index, content in enumerate(contents):
        where = f"contents[{index}]"
        role = content.get("role") if isinstance(content, dict) else None
        expected = "user" if index % 2 == 0 else "model"
        if role != expected:
            problems.append(f"{where}: role {role!r} where the turns want {expected!r}")
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list) or not parts:
            problems.append(f"{where}: parts must be a non-empty list")
            waiting = []
            continue
        calls: list[tuple[str, str]] = []
        responses: list[tuple[str, str]] = []
        for i, part in enumerate(parts):
            at = f"{where}.parts[{i}]"
            kind = _kind(at, part, problems)
            if kind == "functionCall":
                call = part["functionCall"]
                calls.append((str(call.get("id") or ""), str(call.get("name") or "")))
                if call.get("id") and (problem := call_id_problem(at, call["id"], NAME)):
                    problems.append(problem)
                if role != "model":
                    problems.append(f"{at}: a function call belongs to the model's turn")
            elif kind == "functionResponse":
                response = part["functionResponse"]
                responses.append((str(response.get("id") or ""), str(response.get("name") or "")))
                if role != "user":
                    problems.append(f"{at}: a function response belongs to the user's turn")
                if not isinstance(response.get("response"), dict):
                    problems.append(f"{at}: response must be an object")
        problems += _answers(where, waiting, responses)
        waiting = calls
    if waiting:
        problems.append(f"the contents end before the responses to {waiting}")
    for index, tool in enumerate(request.get("tools") or []):
        if not isinstance(tool, dict) or not isinstance(tool.get("functionDeclarations"), list):
            problems.append(f"tools[{index}] must hold functionDeclarations")
    return problems


def _kind(at: str, part: Any, problems: list[str]) -> str | None:
    if not isinstance(part, dict):
        problems.append(f"{at} is not an object")
        return None
    data = [key for key in part if key in _DATA]
    unknown = [key for key in part if key not in _DATA and key not in _BESIDE]
    if unknown:
        problems.append(f"{at}: unknown fields {unknown}")
    if len(data) != 1:
        problems.append(f"{at}: a part holds exactly one kind of data, not {data}")
        return None
    if data[0] == "text" and (not isinstance(part["text"], str) or not part["text"]):
        problems.append(f"{at}: text must be a non-empty string")
    return data[0]


def _answers(
    where: str, calls: list[tuple[str, str]], responses: list[tuple[str, str]]
) -> list[str]:
    """Each call of the model turn before answered once by these responses: by id
    where both have one, else by name."""
    left = list(calls)
    unmatched = []
    for call_id, name in responses:
        match = next((c for c in left if call_id and c[0] == call_id), None)
        if match is None:
            unmatched.append((call_id, name))
        else:
            left.remove(match)
    problems = []
    for call_id, name in unmatched:
        match = next((c for c in left if not c[0] and c[1] == name), None)
        if match is None:
            problems.append(f"{where}: response {call_id or name!r} answers no call just before")
        else:
            left.remove(match)
    if left:
        problems.append(f"{where} lacks the responses to {left}")
    return problems
