"""A whole model turn with litellm, on the session store's prompt view (extra ``[litellm]``).

    from sessionstore_client import Client
    from sessionstore_client.litellm import complete_turn

    turn = complete_turn(client, session_id, model="openai/gpt-4o")
    for call in turn.tool_calls:
        ...  # run it, append its result, then complete_turn again

``complete_turn`` reads the prompt view (what the store's context management
makes of the session: compacted, guarded, pruned), in OpenAI's chat format,
which litellm takes for every provider and translates to the provider's own;
the session's stored tools go with it unless ``tools`` is given. It calls
``litellm.completion`` and appends the answer (text, thinking with its signature,
tool calls) with the provider's usage and a reference to the view it answered,
so the store calibrates its counts and an audit can replay the request. When the
provider refuses the request, it reports the refusal to the store (ReportOverflow),
whose classifier decides whether it was too long: it knows more providers' words for
that than litellm's ``ContextWindowExceededError`` (Anthropic's request too large in
bytes among them), with the request's size in bytes, so that a limit in bytes is
learned from what was sent, not from the store's rendering of the view alone. Too
long, the store truncates and compacts, and the new view is
tried, at most 3 times; then it raises ``ContextOverflow``. Anything else, the
provider's own error is raised. ``acomplete_turn`` is the same
with ``litellm.acompletion`` and an ``AsyncClient``.

Every answer the provider gave is stored, as it came where the store can hold it:
an empty answer as the text ``EMPTY_ANSWER`` (metadata ``empty_answer``), and a
tool call whose arguments are no JSON object (cut short at ``finish_reason``
"length", say) with arguments ``{}`` and the text that came in the metadata
``unparsed_arguments`` (a JSON object by call id): check it before running the call.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

# litellm fetches its model price map over the network at import unless told not to;
# the copy it ships serves here.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
from litellm.exceptions import BadRequestError, ContextWindowExceededError

from sessionstore_client.aio import AsyncClient
from sessionstore_client.client import Client
from sessionstore_client.errors import InvalidArgument
from sessionstore_client.types import (
    ContentBlock,
    Entry,
    PromptFormat,
    PromptRef,
    PromptView,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    Usage,
)

__all__ = ["EMPTY_ANSWER", "ContextOverflow", "Turn", "acomplete_turn", "complete_turn"]

# Overflow reports (and tries after them) per turn.
MAX_RETRIES = 3
# The text of an answer with none: the store holds no empty entry, and dropping the
# turn would lose what the provider was paid for.
EMPTY_ANSWER = "(the model answered nothing)"


class ContextOverflow(Exception):
    """The provider refused the prompt as too long even after the store compacted it
    MAX_RETRIES times: raise the model's window (or lower the session's budget)."""


@dataclass(frozen=True)
class Turn:
    """The model's answer, as appended: the entry, the session's version after it, the
    provider's response, the view it answered, and the tries it took."""

    entry: Entry
    version: int
    response: Any
    view: PromptView
    attempts: int

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.entry.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> list[ToolCallBlock]:
        return [b for b in self.entry.content if isinstance(b, ToolCallBlock)]


def complete_turn(client: Client, session_id: str, *, model: str, **litellm_kwargs: Any) -> Turn:
    """One model turn on the session's prompt view; see the module's documentation."""
    view = client.get_prompt_view(session_id, format=PromptFormat.OPENAI)
    for attempt in range(1, MAX_RETRIES + 2):
        request = _request(model, view, litellm_kwargs)
        try:
            response = litellm.completion(**request)
        except BadRequestError as refused:
            if attempt > MAX_RETRIES:
                raise _gave_up(session_id, refused) from refused
            try:
                view = client.report_overflow(session_id, **_report(model, view, request, refused))
            except InvalidArgument:
                _raise_unless_overflow(refused)
                raise
            continue
        entry = _answer_entry(model, view, response)
        answer = client.append_entries(session_id, entries=[entry])
        return Turn(_stored(entry, answer.entry_ids), answer.version, response, view, attempt)
    raise AssertionError("unreachable: the last try returns or raises")


async def acomplete_turn(
    client: AsyncClient, session_id: str, *, model: str, **litellm_kwargs: Any
) -> Turn:
    """``complete_turn`` for asyncio."""
    view = await client.get_prompt_view(session_id, format=PromptFormat.OPENAI)
    for attempt in range(1, MAX_RETRIES + 2):
        request = _request(model, view, litellm_kwargs)
        try:
            response = await litellm.acompletion(**request)
        except BadRequestError as refused:
            if attempt > MAX_RETRIES:
                raise _gave_up(session_id, refused) from refused
            try:
                view = await client.report_overflow(
                    session_id, **_report(model, view, request, refused)
                )
            except InvalidArgument:
                _raise_unless_overflow(refused)
                raise
            continue
        entry = _answer_entry(model, view, response)
        answer = await client.append_entries(session_id, entries=[entry])
        return Turn(_stored(entry, answer.entry_ids), answer.version, response, view, attempt)
    raise AssertionError("unreachable: the last try returns or raises")


def _request(model: str, view: PromptView, given: dict[str, Any]) -> dict[str, Any]:
    request = {"model": model, "messages": json.loads(view.messages_json), **given}
    tools = json.loads(view.tools_json or "[]")
    if tools and "tools" not in given:
        request["tools"] = tools
    return request


def _report(
    model: str, view: PromptView, request: dict[str, Any], refused: Exception
) -> dict[str, Any]:
    return {
        "error_text": str(refused),
        "status_code": int(getattr(refused, "status_code", 0) or 400),
        "provider": _provider(model),
        "view_version": view.version,
        "view_hash": view.request_hash,
        "format": PromptFormat.OPENAI,
        "request_bytes": _request_bytes(request),
    }


# What a provider's request body is made of, among what complete_turn passes litellm
# (the rest, api_base, api_key, headers and timeouts, travel outside the body).
_BODY_PARTS = ("model", "messages", "tools", "system")


def _request_bytes(request: dict[str, Any]) -> int:
    """The refused request's size in bytes, as near as the client can tell cheaply: the
    JSON of its model, messages (the system prompt among them), tools and any ``system``
    given, encoded as litellm encodes a request body (``json.dumps``' defaults: spaces
    after separators, non-ASCII text escaped). It counts what the store's rendering of
    the view leaves out (tools given here in place of the session's, litellm's spacing),
    not the few bytes of the other parameters, nor how litellm's conversion to the
    provider's format changes it (a few percent, either way). 0 when it does not encode
    (the store then measures its own rendering)."""
    body = {part: request[part] for part in _BODY_PARTS if part in request}
    try:
        return len(json.dumps(body, default=str).encode())
    except (TypeError, ValueError):
        return 0


def _raise_unless_overflow(refused: BadRequestError) -> None:
    """Raises the provider's refusal the store did not take as an overflow (a bad
    request no shorter prompt cures); one litellm named an overflow is the store's
    to answer for."""
    if not isinstance(refused, ContextWindowExceededError):
        raise refused from None


def _gave_up(session_id: str, refused: Exception) -> ContextOverflow:
    return ContextOverflow(
        f"the provider refused session {session_id!r}'s prompt as too long after the store "
        f"compacted it {MAX_RETRIES} times ({refused}); use a model with a larger window"
    )


def _provider(model: str) -> str:
    try:
        return str(litellm.get_llm_provider(model)[1])
    except Exception:  # a name litellm does not know: the store works it out
        return ""


def _answer_entry(model: str, view: PromptView, response: Any) -> Entry:
    choice = response.choices[0]
    message = choice.message
    metadata = {
        "model": str(response.model or model),
        "provider": _provider(model),
        "finish_reason": str(choice.finish_reason or ""),
    }
    content: list[ContentBlock] = [
        ThinkingBlock(str(b.get("thinking", "")), str(b.get("signature", "")))
        for b in getattr(message, "thinking_blocks", None) or []
        if b.get("type") == "thinking"
    ]
    if message.content:
        content.append(TextBlock(_storable(str(message.content))))
    calls, unparsed = _tool_calls(message.tool_calls or [])
    content += calls
    if unparsed:
        metadata["unparsed_arguments"] = json.dumps(unparsed)
    if not any(_has_substance(block) for block in content):
        content.append(TextBlock(EMPTY_ANSWER))
        metadata["empty_answer"] = "true"
    usage = getattr(response, "usage", None)
    details = getattr(usage, "prompt_tokens_details", None)
    return Entry(
        role=Role.ASSISTANT,
        content=content,
        usage=Usage(
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cache_read_tokens=int(getattr(details, "cached_tokens", 0) or 0),
        ),
        prompt_ref=PromptRef(view.version, PromptFormat.OPENAI, view.request_hash),
        metadata=metadata,
    )


def _tool_calls(calls: list[Any]) -> tuple[list[ContentBlock], dict[str, str]]:
    """The answer's tool calls as blocks, and the arguments (by call id) that are no JSON
    object and so are stored as ``{}``: the store refuses them, and the turn would be lost."""
    blocks: list[ContentBlock] = []
    unparsed: dict[str, str] = {}
    for call in calls:
        arguments = str(call.function.arguments or "{}")
        if not _json_object(arguments):
            unparsed[str(call.id)] = arguments
            arguments = "{}"
        blocks.append(ToolCallBlock(str(call.id), str(call.function.name), arguments))
    return blocks, unparsed


def _json_object(text: str) -> bool:
    """Whether ``text`` is a JSON object the store takes: valid JSON, re-encodable as
    UTF-8 (no lone surrogate escapes)."""
    try:
        value = json.loads(text)
        json.dumps(value, ensure_ascii=False).encode()
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return False
    return isinstance(value, dict)


def _has_substance(block: ContentBlock) -> bool:
    # The store refuses an entry whose every block is blank.
    if isinstance(block, TextBlock):
        return bool(block.text.strip())
    if isinstance(block, ThinkingBlock):
        return bool(block.thinking.strip())
    return True


def _storable(text: str) -> str:
    """``text`` as the store can hold it: a lone surrogate (JSON's "\\ud800" decodes to
    one) and NUL become U+FFFD rather than costing the whole turn."""
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.replace("\x00", "\ufffd")


def _stored(entry: Entry, entry_ids: list[str]) -> Entry:
    entry.id = entry_ids[0]
    return entry
