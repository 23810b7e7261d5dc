"""A model provider on loopback that speaks OpenAI's and Anthropic's real wire protocols.

No provider is reachable from the tests, and mocking litellm would prove
nothing about how it talks to one. This server answers
``POST /v1/chat/completions`` (OpenAI, and every OpenAI-compatible local
server), ``POST /v1/responses`` (OpenAI's Responses API, text replies) and
``POST /v1/messages`` (Anthropic, compaction on demand by ``compaction``
included), ``POST /v1/responses/compact`` (OpenAI's compaction) and
``POST /v1/embeddings`` (OpenAI's embeddings, a deterministic bag of concepts)
with the providers' own response and error bodies, so litellm's real client
and error mapping run end to end.

Every request is recorded. Behaviour is scripted per request, in order
(:meth:`FakeProvider.script`), else the default reply: a deterministic
structured summary built from the request. With ``window_tokens`` set, any
request whose estimated size (characters / 4, plus ``max_tokens``) exceeds
the window is refused with the provider's real overflow error, so a test can
prove no call exceeded the summariser's window. With ``max_request_bytes`` set,
any request whose body is larger is refused as Anthropic refuses one over its
byte limit (HTTP 413, ``request_too_large``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

OPENAI_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
ANTHROPIC_PATH = "/v1/messages"
EMBEDDINGS_PATH = "/v1/embeddings"
COMPACT_PATH = "/v1/responses/compact"
EMBEDDING_DIMENSIONS = 256
# How long a test waits for a server's first request to the provider: it comes after
# the server's import of litellm, 7-8 s of CPU on an idle machine and several times
# that on a busy one. A bound only, so that a test that fails ends.
FIRST_REQUEST_SECONDS = 60.0
# The loopback embedding model's notion of meaning: words of one concept embed
# alike, so a semantic search finds what shares no word with the query.
CONCEPTS = {
    "automobile": "car",
    "vehicle": "car",
    "sedan": "car",
    "cars": "car",
    "canine": "dog",
    "puppy": "dog",
    "hound": "dog",
    "dogs": "dog",
    "feline": "cat",
    "kitten": "cat",
    "cats": "cat",
    "colour": "color",
    "hue": "color",
}

# The providers' error bodies, as their APIs send them.
OPENAI_ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "overflow": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, "
                "your messages resulted in 130000 tokens. Please reduce the length of the "
                "messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    # A bad request that no shorter prompt would cure.
    "bad_request": (
        400,
        {
            "error": {
                "message": "Invalid value for 'temperature': expected a number between 0 "
                "and 2, got 7.",
                "type": "invalid_request_error",
                "param": "temperature",
                "code": "invalid_value",
            }
        },
    ),
    "rate_limit": (
        429,
        {
            "error": {
                "message": "Rate limit reached for gpt-4o-mini in organization org-test on "
                "tokens per min (TPM): Limit 200000, Used 199000, Requested 4000. Please try "
                "again in 1.2s. Visit https://platform.openai.com/account/rate-limits to "
                "learn more.",
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
    ),
    "server_error": (
        500,
        {
            "error": {
                "message": "The server had an error while processing your request. Sorry "
                "about that!",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
    ),
    "auth": (
        401,
        {
            "error": {
                "message": "Incorrect API key provided: sk-test. You can find your API key "
                "at https://platform.openai.com/account/api-keys.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        },
    ),
}
ANTHROPIC_ERRORS: dict[str, tuple[int, dict[str, Any]]] = {
    "overflow": (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum",
            },
        },
    ),
    # Over the request's byte limit (32 MB for the Messages API), whatever its tokens.
    "too_large": (
        413,
        {
            "type": "error",
            "error": {
                "type": "request_too_large",
                "message": "Request exceeds the maximum allowed number of bytes.",
            },
        },
    ),
    "rate_limit": (
        429,
        {
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "Number of request tokens has exceeded your per-minute rate limit "
                "(https://docs.anthropic.com/en/api/rate-limits); see the response headers "
                "for current usage. Please reduce the prompt length or the maximum tokens "
                "requested, or try again later.",
            },
        },
    ),
    "overloaded": (
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ),
    "server_error": (
        500,
        {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}},
    ),
    "auth": (
        401,
        {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        },
    ),
}


@dataclass(frozen=True)
class Behaviour:
    """What to do with one request: reply (with ``text``, or the default summary; or
    with tool calls), after ``delay`` seconds, or fail with the provider's error ``error``."""

    text: str | None = None
    delay: float = 0.0
    error: str | None = None
    # (call id, tool name, arguments) of each tool call the reply makes.
    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
    # Fields a compaction answer's item has in place of its own (a malformed answer).
    item: dict[str, Any] | None = None
    # The arguments text an OpenAI reply's calls send in place of their own, with
    # finish_reason "length": an answer cut short in the middle of a call.
    cut_arguments: str | None = None
    # The vectors an embeddings answer holds in place of the model's, one per input
    # in turn (a malformed answer: of two sizes, or not numbers).
    vectors: tuple[tuple[float, ...], ...] | None = None


def reply(text: str) -> Behaviour:
    return Behaviour(text=text)


def delay(seconds: float, text: str | None = None) -> Behaviour:
    return Behaviour(text=text, delay=seconds)


def call(call_id: str, name: str, **arguments: Any) -> Behaviour:
    """A reply that calls tool ``name`` with ``arguments`` (and no text)."""
    return Behaviour(text="", calls=((call_id, name, arguments),))


def cut_short(call_id: str, name: str, arguments_text: str) -> Behaviour:
    """A reply (OpenAI's protocol) cut short at the token limit while calling tool ``name``:
    its arguments are ``arguments_text``, whatever that is."""
    return Behaviour(text="", calls=((call_id, name, {}),), cut_arguments=arguments_text)


def compaction_item(**fields: Any) -> Behaviour:
    """A compaction answered with ``fields`` in its item in place of its own."""
    return Behaviour(item=fields)


def vectors(*rows: tuple[float, ...]) -> Behaviour:
    """An embeddings answer holding these vectors, the first input's first."""
    return Behaviour(vectors=rows)


def fail(error: str) -> Behaviour:
    """One of "overflow", "rate_limit", "server_error", "auth", "bad_request" (OpenAI),
    "overloaded" and "too_large" (Anthropic)."""
    return Behaviour(error=error)


@dataclass
class Received:
    path: str
    # Lower-cased names: HTTP header names are case-insensitive.
    headers: dict[str, str]
    body: dict[str, Any]
    # chars / 4 of every message's text (and the system prompt).
    estimated_tokens: int = 0
    refused: str = ""
    # The body's size in bytes, as sent.
    size: int = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body.get("messages", [])
        return messages

    def text(self) -> str:
        return _request_text(self.body)


class LoopbackServer(ABC):
    """An HTTP server on a free loopback port, serving POSTs on threads of its own while
    the ``with`` block runs; subclasses answer in :meth:`_handle`."""

    def _serve(self) -> None:
        server = self
        self._stopping = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as SDK clients use it

            def do_POST(self) -> None:
                server._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @abstractmethod
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        """Answers one POST."""

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"


@dataclass
class FakeProvider(LoopbackServer):
    window_tokens: int | None = None
    requests: list[Received] = field(default_factory=list)
    max_request_bytes: int | None = None
    # The size of the embedding model's vectors; set another to serve the model changed.
    embedding_dimensions: int = EMBEDDING_DIMENSIONS

    def __post_init__(self) -> None:
        self._script: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._serve()

    @property
    def openai_base(self) -> str:
        return f"{self.url}/v1"

    # -- scripting ---------------------------------------------------------------------

    def script(self, *behaviours: Behaviour) -> None:
        """The behaviour of the next requests, in order; then the default reply."""
        with self._lock:
            self._script.extend(behaviours)

    def _next(self) -> Behaviour:
        with self._lock:
            return self._script.popleft() if self._script else Behaviour()

    # -- serving -----------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length) or b"{}")
        path = handler.path.split("?", 1)[0]
        received = Received(path, {k.lower(): v for k, v in handler.headers.items()}, body)
        received.size = length
        received.estimated_tokens = math.ceil(len(_request_text(body)) / 4)
        with self._lock:
            self.requests.append(received)
        if path == EMBEDDINGS_PATH:
            behaviour = self._next()
            if behaviour.delay and self._stopping.wait(behaviour.delay):
                return
            if behaviour.error is not None:
                status, error_body = OPENAI_ERRORS[behaviour.error]
                send(handler, status, error_body)
                return
            send(handler, 200, embeddings_reply(body, self.embedding_dimensions, behaviour.vectors))
            return
        if path not in (OPENAI_PATH, RESPONSES_PATH, ANTHROPIC_PATH, COMPACT_PATH):
            send(handler, 404, {"error": {"message": f"unknown path {path}"}})
            return
        anthropic = path == ANTHROPIC_PATH
        if self.max_request_bytes is not None and length > self.max_request_bytes:
            # Refused before it is read: the scripted behaviour waits for the retry.
            received.refused = "too_large"
            send(handler, *ANTHROPIC_ERRORS["too_large"])
            return
        behaviour = self._next()
        if behaviour.delay and self._stopping.wait(behaviour.delay):
            return
        overflow = self._over_window(received, anthropic)
        if overflow is not None:
            received.refused = "overflow"
            send(handler, 400, overflow)
            return
        if behaviour.error is not None:
            errors = ANTHROPIC_ERRORS if anthropic else OPENAI_ERRORS
            status, error_body = errors[behaviour.error]
            received.refused = behaviour.error
            send(handler, status, error_body)
            return
        text = behaviour.text if behaviour.text is not None else default_summary(body)
        output_tokens = math.ceil(len(text) / 4) + 10 * len(behaviour.calls)
        usage = (received.estimated_tokens, output_tokens)
        if anthropic and "compaction" in body:
            refusal = _on_demand_refusal(body, received.headers)
            received.refused = "compaction" if refusal else ""
            if refusal:
                send(handler, 400, anthropic_invalid(refusal))
            else:
                summary = compaction_summary(body)
                send(handler, 200, on_demand_compaction_reply(body, summary, *usage))
            return
        if anthropic and _prefills(body):
            received.refused = "prefill"
            send(handler, 400, anthropic_invalid(PREFILL_REFUSAL))
            return
        if path == COMPACT_PATH:
            answer = compact_reply(body, compaction_summary(body), *usage)
            answer["output"][-1].update(behaviour.item or {})
            send(handler, 200, answer)
        elif path == RESPONSES_PATH:
            send(handler, 200, _responses_reply(body, text, received, output_tokens))
        elif anthropic:
            send(handler, 200, anthropic_reply(body, text, behaviour.calls, *usage))
        else:
            answer = openai_reply(body, text, behaviour.calls, *usage, behaviour.cut_arguments)
            send(handler, 200, answer)

    def _over_window(self, received: Received, anthropic: bool) -> dict[str, Any] | None:
        if self.window_tokens is None:
            return None
        prompt = received.estimated_tokens
        completion = int(received.body.get("max_tokens") or 0)
        if prompt + completion <= self.window_tokens:
            return None
        return overflow_error(anthropic, prompt, completion, self.window_tokens)


def embed_text(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic unit vector: each word (as its concept) adds to one dimension."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        concept = CONCEPTS.get(word, word)
        digest = hashlib.sha256(concept.encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % dimensions] += 1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def embeddings_reply(
    body: dict[str, Any],
    dimensions: int = EMBEDDING_DIMENSIONS,
    answered: Sequence[Sequence[float]] | None = None,
) -> dict[str, Any]:
    """OpenAI's /v1/embeddings answer (or one holding ``answered`` in place of the
    model's vectors); base64 float32 when the client asks for it (the openai SDK
    does by default)."""
    inputs = body.get("input", [])
    texts = [inputs] if isinstance(inputs, str) else list(inputs)
    data = []
    for index, text in enumerate(texts):
        vector = list(answered[index]) if answered else embed_text(str(text), dimensions)
        encoded: Any = vector
        if body.get("encoding_format") == "base64":
            encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(math.ceil(len(str(t)) / 4) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model", ""),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def overflow_error(anthropic: bool, prompt: int, completion: int, window: int) -> dict[str, Any]:
    """The body of the provider's 400 for a prompt of ``prompt`` tokens that, with the
    ``completion`` tokens asked for, does not fit ``window``: the APIs' own words."""
    if anthropic:
        if prompt > window:
            message = f"prompt is too long: {prompt} tokens > {window} maximum"
        else:
            message = (
                f"input length and `max_tokens` exceed context limit: {prompt} + "
                f"{completion} > {window}, decrease input length or `max_tokens` and "
                "try again"
            )
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {
        "error": {
            "message": f"This model's maximum context length is {window} tokens. However, "
            f"you requested {prompt + completion} tokens ({prompt} in the messages, "
            f"{completion} in the completion). Please reduce the length of the messages "
            "or completion.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def send(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up (a timeout test)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(block.get("text", "") for block in content if isinstance(block, dict))
    return ""


def _request_text(body: dict[str, Any]) -> str:
    parts = [_content_text(body.get("system", "")), _content_text(body.get("instructions"))]
    parts += [_content_text(m.get("content")) for m in body.get("messages", [])]
    given = body.get("input")
    items = [{"content": given}] if isinstance(given, str) else given or []
    parts += [_content_text(i.get("content")) for i in items if isinstance(i, dict)]
    return "\n".join(p for p in parts if p)


def default_summary(body: dict[str, Any]) -> str:
    """A structured summary echoing the request: its first conversation line as the goal."""
    user = next(
        (_content_text(m.get("content")) for m in body.get("messages", []) if m["role"] == "user"),
        "",
    )
    conversation = user.split("<conversation>", 1)[-1]
    lines = [line.strip() for line in conversation.splitlines()]
    first = next((line for line in lines if line and not line.startswith("<")), "(none)")
    ids = [line.split('"')[1] for line in lines if line.startswith("<entry id=")]
    covered = f"`{ids[0]}` .. `{ids[-1]}` ({len(ids)} entries)" if ids else "(none)"
    return (
        f"## Goal\n- {first[:200]}\n## Constraints\n- (none)\n## Progress\n- summarised "
        f"{len(ids)} entries\n## Key Decisions\n- (none)\n## Next Steps\n- (none)\n"
        f"## Critical Context\n- (none)\n## Raw History\n- Entries {covered}"
    )


Call = tuple[str, str, dict[str, Any]]


def openai_reply(
    body: dict[str, Any],
    text: str,
    calls: Sequence[Call],
    prompt_tokens: int,
    output_tokens: int,
    cut_arguments: str | None = None,
) -> dict[str, Any]:
    """A chat completion answering ``text`` and calling ``calls`` (id, name, arguments);
    with ``cut_arguments``, cut short: every call's arguments are that text."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    finish_reason = "tool_calls" if calls else "stop"
    if calls:
        message["content"] = text or None
        message["tool_calls"] = [
            {
                "id": i,
                "type": "function",
                "function": {"name": n, "arguments": _arguments(a, cut_arguments)},
            }
            for i, n, a in calls
        ]
    if cut_arguments is not None:
        finish_reason = "length"
    return {
        "id": f"chatcmpl-fake{len(text)}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens,
        },
    }


def _arguments(arguments: dict[str, Any], cut: str | None) -> str:
    return json.dumps(arguments) if cut is None else cut


def _responses_reply(
    body: dict[str, Any], text: str, received: Received, output_tokens: int
) -> dict[str, Any]:
    return {
        "id": f"resp_fake{len(text)}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": body.get("model", ""),
        "output": [
            {
                "type": "message",
                "id": f"msg_fake{len(text)}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": received.estimated_tokens,
            "output_tokens": output_tokens,
            "total_tokens": received.estimated_tokens + output_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def compaction_summary(body: dict[str, Any]) -> str:
    """What the loopback provider's compaction keeps: the start of what it was sent."""
    return "Compacted conversation: " + " ".join(_request_text(body).split())[:400]


def encrypted(text: str) -> str:
    """What the loopback provider's opaque compaction items hold: the summary, in base64."""
    return base64.b64encode(text.encode()).decode()


def compact_reply(
    body: dict[str, Any], text: str, prompt_tokens: int, output_tokens: int
) -> dict[str, Any]:
    """OpenAI's POST /v1/responses/compact answer: the compacted window, every user
    message of the input as it came, then one opaque compaction item whose content is
    the summary, encrypted (in base64)."""
    kept = [
        _kept_user_message(number, item)
        for number, item in enumerate(body.get("input") or [])
        if isinstance(item, dict) and item.get("role") == "user"
    ]
    compaction = {
        "type": "compaction",
        "id": f"cmp_{len(text)}",
        "encrypted_content": encrypted(text),
    }
    return {
        "id": f"resp_compact{len(text)}",
        "object": "response.compaction",
        "created_at": 1_700_000_000,
        "model": body.get("model", ""),
        "output": [*kept, compaction],
        "usage": {
            "input_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens,
        },
    }


def _kept_user_message(number: int, item: dict[str, Any]) -> dict[str, Any]:
    """A user message of a compacted input, as /responses/compact answers it: an output
    message with its content as parts."""
    content = item.get("content")
    parts = [{"type": "input_text", "text": content}] if isinstance(content, str) else content
    return {
        "id": f"msg_kept{number}",
        "type": "message",
        "status": "completed",
        "role": "user",
        "content": parts,
    }


# Claude models from 4.6 on refuse a conversation that ends with the assistant's turn.
_NO_PREFILL = re.compile(r"claude-(?:opus|sonnet|haiku)-(?:4-[6-9]|[5-9])|claude-mythos")
PREFILL_REFUSAL = (
    "This model does not support assistant message prefill. The conversation must end "
    "with a user message."
)
ON_DEMAND_BETA = "compact-2026-09-04"


def anthropic_invalid(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _on_demand_refusal(body: dict[str, Any], headers: dict[str, str]) -> str:
    """Why the API would refuse a request for an on-demand compaction, or ""."""
    if ON_DEMAND_BETA not in headers.get("anthropic-beta", ""):
        return "compaction: Extra inputs are not permitted"
    if body["compaction"] != {"type": "summarize"}:
        return "compaction.type: Input should be 'summarize'"
    if "context_management" in body:
        return "compaction cannot be combined with context_management"
    messages = body.get("messages") or []
    if not messages:
        return "there is nothing to summarize"
    # One compaction block at most, and only in front of everything (it stands for
    # the messages it summarised): compaction_block_misplaced otherwise.
    blocks = [
        (m, b)
        for m, message in enumerate(messages)
        for b, block in enumerate(message.get("content") or [])
        if isinstance(block, dict) and block.get("type") == "compaction"
    ]
    if len(blocks) > 1:
        return "A request can carry only one compaction block. Send the newest one."
    if blocks and blocks[0] != (0, 0):
        return (
            "compaction_block_misplaced: the compaction block must come first in messages; "
            "remove the messages it summarizes"
        )
    last = messages[-1]
    content = last.get("content") if isinstance(last.get("content"), list) else []
    if last.get("role") == "assistant" and any(b.get("type") == "tool_use" for b in content):
        return "the last assistant turn ends in a tool call with no result yet"
    return ""


def on_demand_compaction_reply(
    body: dict[str, Any], text: str, prompt_tokens: int, output_tokens: int
) -> dict[str, Any]:
    """A Messages reply to an on-demand compaction: the signed block alone, and the
    call's usage as its compaction iteration (the top-level usage is zero)."""
    signature = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
    return {
        "id": f"msg_summary{len(text)}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": [{"type": "compaction", "content": text, "signature": signature}],
        "stop_reason": "compaction",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 0,
            "output_tokens": 0,
            "iterations": [
                {
                    "type": "compaction",
                    "input_tokens": prompt_tokens,
                    "output_tokens": output_tokens,
                }
            ],
        },
    }


def _prefills(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return (
        bool(_NO_PREFILL.search(str(body.get("model", ""))))
        and bool(messages)
        and messages[-1].get("role") == "assistant"
    )


def anthropic_reply(
    body: dict[str, Any],
    text: str,
    calls: Sequence[Call],
    prompt_tokens: int,
    output_tokens: int,
) -> dict[str, Any]:
    """A Messages reply answering ``text`` and calling ``calls`` (id, name, input)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text or not calls else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return {
        "id": f"msg_fake{len(text)}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_tokens, "output_tokens": output_tokens},
    }
