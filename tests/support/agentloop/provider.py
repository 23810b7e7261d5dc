"""A model provider on loopback that validates, counts and answers as the real APIs do.

It serves OpenAI's chat completions and Anthropic's Messages on one port, for
two models: the agent's, which plays the scripted model of
:mod:`tests.support.agentloop.script`, and a summariser's, which the store's
LLM summariser calls. Every request is checked against the provider's rules
(:mod:`tests.support.agentloop.rules`) and refused with the provider's 400 when
it breaks one. Tokens are counted the provider's own way: o200k_base over what
is sent (text, tool calls and their JSON, tool schemas, a few tokens a
message) times ``ratio``, as Claude's tokenizer counts some 1.15-1.3x o200k;
tool results times ``result_ratio`` when it is given, as a provider counts some
content (JSON, code, images) at a higher rate than prose.
A prompt that with its ``max_tokens`` passes the model's window gets the
provider's real overflow error, naming the figures; usage reports give the
count.

The model answers what it sees: it finds the user message of the turn in
progress, counts the tool results after it and calls the next step's tools,
or answers when all came back. A request where that message is missing
(summarised away, or cut) is recorded, and the model, as a real one would,
starts the turn's work again.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.support.agentloop.rules import Refused, check_anthropic_messages, check_openai_chat
from tests.support.agentloop.script import Script, ToolCall, Turn
from tests.support.fake_provider import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    Call,
    LoopbackServer,
    anthropic_reply,
    default_summary,
    openai_reply,
    overflow_error,
    send,
)

# tiktoken reads the encodings litellm ships, offline.
_litellm = importlib.util.find_spec("litellm")
if _litellm and _litellm.submodule_search_locations:
    _encodings = Path(_litellm.submodule_search_locations[0]) / "litellm_core_utils/tokenizers"
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(_encodings))

import tiktoken  # noqa: E402  (needs TIKTOKEN_CACHE_DIR first)

AGENT_MODEL = "agent-model"
SUMMARIZER_MODEL = "summarizer-model"
# What the API adds around each message and to every request.
MESSAGE_TOKENS = 3
REQUEST_TOKENS = 3


@dataclass
class Request:
    """One request as the provider saw it."""

    model: str
    tokens: int
    # "" when answered; else "overflow" or "invalid: <the provider's message>".
    refused: str = ""
    # For the agent's model: the turn in progress, and what was wrong with what it saw.
    turn: int = 0
    missing_turn: bool = False
    lost_tails: list[str] = field(default_factory=list)


class Counter:
    """o200k_base times ``ratio`` (tool results times ``result_ratio``, when given),
    each distinct text counted once."""

    def __init__(self, ratio: float, result_ratio: float | None = None) -> None:
        self.ratio = ratio
        self.result_ratio = ratio if result_ratio is None else result_ratio
        self._encoding = tiktoken.get_encoding("o200k_base")
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def text(self, text: str) -> int:
        with self._lock:
            known = self._counts.get(text)
        if known is None:
            known = len(self._encoding.encode(text, disallowed_special=()))
            with self._lock:
                self._counts[text] = known
        return known

    def request(self, body: dict[str, Any]) -> int:
        tools = body.get("tools")
        parts = [_content_text(body.get("system")), json.dumps(tools) if tools else ""]
        raw = REQUEST_TOKENS + sum(self.text(p) for p in parts if p)
        results = 0
        for message in body.get("messages") or []:
            raw += MESSAGE_TOKENS + sum(self.text(t) for t in _message_texts(message) if t)
            results += sum(self.text(t) for t in _result_texts(message) if t)
        return math.ceil(raw * self.ratio + results * self.result_ratio)


class ModelProvider(LoopbackServer):
    """The loopback provider; ``turn`` is the agent's turn in progress."""

    def __init__(
        self,
        script: Script,
        *,
        window_tokens: int,
        ratio: float = 1.0,
        result_ratio: float | None = None,
        summarizer_window_tokens: int = 32_768,
    ) -> None:
        self.script = script
        self.window_tokens = window_tokens
        self.summarizer_window_tokens = summarizer_window_tokens
        self.counter = Counter(ratio, result_ratio)
        self.turn = 0
        self.requests: list[Request] = []
        self._calls: dict[str, ToolCall] = {
            call.id: call for turn in script.turns for step in turn.steps for call in step
        }
        self._lock = threading.Lock()
        self._serve()

    def agent_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.model == AGENT_MODEL]

    def summarizer_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.model == SUMMARIZER_MODEL]

    # -- serving -----------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(handler.rfile.read(int(handler.headers.get("Content-Length") or 0)))
        path = handler.path.split("?", 1)[0]
        if path not in (OPENAI_PATH, ANTHROPIC_PATH):
            send(handler, 404, {"error": {"message": f"unknown path {path}"}})
            return
        anthropic = path == ANTHROPIC_PATH
        model = str(body.get("model", ""))
        summarizer = model != AGENT_MODEL
        request = Request(SUMMARIZER_MODEL if summarizer else AGENT_MODEL, 0)
        with self._lock:
            self.requests.append(request)
        try:
            (check_anthropic_messages if anthropic else check_openai_chat)(body)
        except Refused as refused:
            request.refused = f"invalid: {refused}"
            send(handler, 400, _invalid(anthropic, str(refused)))
            return
        request.tokens = self.counter.request(body)
        completion = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        window = self.summarizer_window_tokens if summarizer else self.window_tokens
        if request.tokens + completion > window:
            request.refused = "overflow"
            send(handler, 400, overflow_error(anthropic, request.tokens, completion, window))
            return
        calls: list[Call] = []
        if summarizer:
            text = default_summary(body)
        else:
            text, calls = self._decide(request, _conversation(body, anthropic))
        output = self.counter.text(text) + 20 * len(calls)
        reply = anthropic_reply if anthropic else openai_reply
        send(handler, 200, reply(body, text, calls, request.tokens, output))

    def _decide(
        self, request: Request, items: list[tuple[str, str, str]]
    ) -> tuple[str, list[Call]]:
        """The model's next move on what it sees: (kind, id, text) items in order."""
        request.turn = self.turn
        turn = self.script.turns[self.turn - 1]
        users = [i for i, (kind, _, _) in enumerate(items) if kind == "user"]
        if not users or items[users[-1]][2] != turn.user:
            request.missing_turn = True
            return _next_step(turn, set())
        after = items[users[-1] + 1 :]
        results = {item_id: text for kind, item_id, text in after if kind == "result"}
        for call_id, shown in results.items():
            call = self._calls.get(call_id)
            if call is not None and call.last_line and call.last_line not in shown:
                request.lost_tails.append(call_id)
        return _next_step(turn, set(results))


def _next_step(turn: Turn, answered: set[str]) -> tuple[str, list[Call]]:
    for step in turn.steps:
        if not all(call.id in answered for call in step):
            return "", [(call.id, call.name, dict(call.arguments)) for call in step]
    return turn.answer, []


def _conversation(body: dict[str, Any], anthropic: bool) -> list[tuple[str, str, str]]:
    """The request's messages as (kind, id, text): user texts, assistant texts and calls,
    tool results, whichever format they came in."""
    items: list[tuple[str, str, str]] = []
    for message in body["messages"]:
        role = message["role"]
        content = message.get("content")
        if role == "tool":
            items.append(("result", message["tool_call_id"], _content_text(content)))
            continue
        if isinstance(content, str) or content is None:
            blocks = [{"type": "text", "text": content or ""}]
        else:
            blocks = content
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                items.append(("user" if role == "user" else "assistant", "", block["text"]))
            elif kind == "tool_result":
                items.append(("result", block["tool_use_id"], _content_text(block.get("content"))))
            elif kind == "tool_use":
                items.append(("call", block["id"], ""))
        for call in message.get("tool_calls") or []:
            items.append(("call", call["id"], ""))
    return items


def _message_texts(message: dict[str, Any]) -> list[str]:
    """What a message says other than tool results (see :func:`_result_texts`)."""
    if message["role"] == "tool":
        return []
    texts = [_content_text(message.get("content"), results=False)]
    for call in message.get("tool_calls") or []:
        texts += [call["function"]["name"], call["function"]["arguments"]]
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if block.get("type") == "tool_use":
            texts += [block["name"], json.dumps(block["input"])]
    return texts


def _result_texts(message: dict[str, Any]) -> list[str]:
    """The tool results a message carries: an OpenAI tool message's content, or the
    contents of Anthropic's tool_result blocks."""
    content = message.get("content")
    if message["role"] == "tool":
        return [_content_text(content)]
    blocks = content if isinstance(content, list) else []
    return [_content_text(b.get("content")) for b in blocks if b.get("type") == "tool_result"]


def _content_text(content: Any, *, results: bool = True) -> str:
    """The text of a message's (or a tool result's, or a system prompt's) content: a
    string, or its blocks' texts and (unless ``results`` is False) tool results'
    contents."""
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for block in content:
        if block.get("type") == "text":
            texts.append(block["text"])
        elif block.get("type") == "tool_result" and results:
            texts.append(_content_text(block.get("content")))
    return "\n".join(texts)


def _invalid(anthropic: bool, message: str) -> dict[str, Any]:
    if anthropic:
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }
