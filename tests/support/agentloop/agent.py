"""An agent that keeps its session in the store and talks to a model, turn after turn.

It uses the store as a runtime would, through the Python client over gRPC and
nothing else: each turn it appends the user's message and gets the prompt view
in the same call (holding the last view, so the store answers only what was
appended), sends the view to the model, appends the answer with the
provider's usage and the view it answered, runs the tools the model called and
appends their results, until the model answers in text. On the provider's
overflow error it reports the error to the store and sends the view it gets
back, at most three times. It does nothing else: any other refusal from the
store is an intervention a real agent would have had to make, and is counted.

On every request it checks what the store promises: the view is within its
budget, the view it assembled from a delta hashes to the store's
``request_hash``, and the provider (which validates and counts on its side)
accepted it; the provider records whether the turn in progress was visible
and whether each log's last line reached the model.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlparse

from sessionstore_client import Client
from sessionstore_client.errors import SessionStoreError
from sessionstore_client.types import (
    AppendEntriesResponse,
    Entry,
    PromptFormat,
    PromptRef,
    PromptView,
    Role,
    SessionSettings,
    SystemPrompt,
    TextBlock,
    Tool,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    ViewAfterAppend,
)

from tests.support.agentloop.provider import AGENT_MODEL, ModelProvider
from tests.support.agentloop.script import TOOLS, Script, ToolCall

# Overflow reports per model request before the agent gives up, as runtimes do.
MAX_OVERFLOW_RETRIES = 3
# More model requests than this in one turn means the agent is looping.
MAX_REQUESTS_PER_TURN = 12
ANSWER_TOKENS = 1_024
SYSTEM_PROMPT = (
    "You are a coding agent working in a repository. Use the tools to read files, fetch "
    "URLs, search and run commands; answer briefly when the user's request is done."
)
_Answer = TypeVar("_Answer", PromptView, AppendEntriesResponse)
_FORMATS = {"openai": PromptFormat.OPENAI, "anthropic": PromptFormat.ANTHROPIC}


@dataclass
class ViewCall:
    """A store call that answered a view: when, and how long it took."""

    started: float
    seconds: float
    # What the engine did for the view (EngineAction kinds and details).
    actions: tuple[str, ...]
    # The provider tokens per store token the view was counted with (0: no view).
    calibration: float = 0.0

    @property
    def waited_for_compaction(self) -> bool:
        return any(
            a.startswith(("waited_for_compaction", "compaction_running")) for a in self.actions
        )


@dataclass
class Run:
    """What one session's loop saw."""

    session_id: str = ""
    turns_done: int = 0
    # Store refusals the agent had to act on; each is "RPC: status".
    interventions: list[str] = field(default_factory=list)
    # The provider's overflow errors, each reported to the store.
    overflows: int = 0
    over_budget: list[str] = field(default_factory=list)
    hash_mismatches: list[str] = field(default_factory=list)
    # Turns the agent could not finish (the provider kept refusing, or it looped).
    stranded: list[str] = field(default_factory=list)
    views: list[ViewCall] = field(default_factory=list)
    # The position of the session's last write, to read the read models after it.
    position: int = 0
    final_view: PromptView | None = None
    final_messages: str = ""


class Agent:
    """Plays ``script`` in session ``session_id`` of the store at ``client``."""

    def __init__(
        self,
        client: Client,
        provider: ModelProvider,
        script: Script,
        *,
        provider_format: str,
        settings: SessionSettings,
    ) -> None:
        self.client = client
        self.provider = provider
        self.script = script
        self.format_name = provider_format
        self.format = _FORMATS[provider_format]
        self.settings = settings
        self.run = Run()
        self._calls = {c.id: c for t in script.turns for step in t.steps for c in step}
        self._held: PromptView | None = None
        self._held_messages = "[]"
        self._http = _Http(provider.url)

    def play(self) -> Run:
        session = self.client.create_session(settings=self.settings)
        self.run.session_id = session.id
        tools = [Tool(t["name"], t["description"], json.dumps(t["parameters"])) for t in TOOLS]
        self.client.set_system_prompt(
            session.id, system_prompt=SystemPrompt(text=SYSTEM_PROMPT, tools=tools)
        )
        for turn in self.script.turns:
            self.provider.turn = turn.number
            view = self._append([Entry(role=Role.USER, content=[TextBlock(turn.user)])])
            if view is None or not self._model_turn(turn.number, view):
                break
            self.run.turns_done = turn.number
        self.run.final_view = self._held
        self.run.final_messages = self._held_messages
        return self.run

    # -- one turn -------------------------------------------------------------------------

    def _model_turn(self, number: int, view: PromptView) -> bool:
        """Requests until the model answers in text; False when the agent is stuck."""
        overflows = 0
        for _ in range(MAX_REQUESTS_PER_TURN):
            status, reply = self._http.post(self._path(), self._request(view))
            if status == 400 and _is_overflow(reply):
                self.run.overflows += 1
                overflows += 1
                if overflows > MAX_OVERFLOW_RETRIES:
                    self.run.stranded.append(f"turn {number}: {overflows} overflows in a row")
                    return False
                reported = self._report_overflow(view, status, reply)
                if reported is None:
                    return False
                view = self._hold(reported)
                continue
            if status != 200:
                self.run.stranded.append(f"turn {number}: the provider answered {status}: {reply}")
                return False
            answer, calls = self._answer_entry(reply, view)
            if not calls:
                return self._append_only([answer])
            if not self._append_only([answer]):
                return False
            results = [self._run_tool(call_id) for call_id in calls]
            next_view = self._append(results)
            if next_view is None:
                return False
            view = next_view
        self.run.stranded.append(f"turn {number}: more than {MAX_REQUESTS_PER_TURN} requests")
        return False

    def _report_overflow(
        self, view: PromptView, status: int, reply: dict[str, Any]
    ) -> PromptView | None:
        return self._view_call(
            "ReportOverflow",
            lambda: self.client.report_overflow(
                self.run.session_id,
                error_text=json.dumps(reply),
                status_code=status,
                provider=self.format_name,
                view_version=view.version,
                view_hash=view.request_hash,
                format=self.format,
            ),
        )

    def _answer_entry(self, reply: dict[str, Any], view: PromptView) -> tuple[Entry, list[str]]:
        if self.format == PromptFormat.ANTHROPIC:
            text = "".join(b["text"] for b in reply["content"] if b["type"] == "text")
            calls = [
                ToolCallBlock(b["id"], b["name"], json.dumps(b["input"]))
                for b in reply["content"]
                if b["type"] == "tool_use"
            ]
            usage = Usage(reply["usage"]["input_tokens"], reply["usage"]["output_tokens"])
        else:
            message = reply["choices"][0]["message"]
            text = message.get("content") or ""
            calls = [
                ToolCallBlock(c["id"], c["function"]["name"], c["function"]["arguments"])
                for c in message.get("tool_calls") or []
            ]
            usage = Usage(reply["usage"]["prompt_tokens"], reply["usage"]["completion_tokens"])
        content: list[Any] = [TextBlock(text)] if text else []
        entry = Entry(
            role=Role.ASSISTANT,
            content=[*content, *calls],
            usage=usage,
            prompt_ref=PromptRef(view.version, self.format, view.request_hash),
            metadata={"model": AGENT_MODEL, "provider": self.format_name},
        )
        return entry, [c.id for c in calls]

    def _run_tool(self, call_id: str) -> Entry:
        call: ToolCall = self._calls[call_id]
        return Entry(
            role=Role.TOOL,
            content=[ToolResultBlock(call_id, call.output(), call.failed)],
        )

    # -- the store --------------------------------------------------------------------------

    def _append(self, entries: list[Entry]) -> PromptView | None:
        """Appends a turn's entries and answers the view after them (None: refused)."""
        held = self._held
        after = ViewAfterAppend(
            format=self.format,
            held_version=held.version if held else None,
            held_hash=held.request_hash if held else "",
        )
        answer = self._view_call(
            "AppendEntries",
            lambda: self.client.append_entries(
                self.run.session_id, entries=entries, view_after_append=after
            ),
        )
        if answer is None:
            return None
        self.run.position = max(self.run.position, answer.position)
        if answer.view_after_append_error or answer.view_after_append is None:
            self.run.interventions.append(f"AppendEntries: {answer.view_after_append_error}")
            return None
        return self._hold(answer.view_after_append)

    def _append_only(self, entries: list[Entry]) -> bool:
        try:
            answer = self.client.append_entries(self.run.session_id, entries=entries)
        except SessionStoreError as refused:
            self.run.interventions.append(f"AppendEntries: {refused}")
            return False
        self.run.position = max(self.run.position, answer.position)
        return True

    def _view_call(self, rpc: str, call: Callable[[], _Answer]) -> _Answer | None:
        started = time.monotonic()
        try:
            answer = call()
        except SessionStoreError as refused:
            self.run.interventions.append(f"{rpc}: {refused}")
            return None
        view = answer if isinstance(answer, PromptView) else None
        if isinstance(answer, AppendEntriesResponse):
            view = answer.view_after_append
        actions = tuple(f"{a.kind}: {a.detail}" for a in view.actions) if view else ()
        calibration = view.calibration if view else 0.0
        self.run.views.append(
            ViewCall(time.time(), time.monotonic() - started, actions, calibration)
        )
        return answer

    def _hold(self, view: PromptView) -> PromptView:
        """The view as the agent now holds it, the delta joined to what it held; checked."""
        if view.appended:
            appended = view.messages_json
            if appended != "[]":
                joiner = "," if self._held_messages != "[]" else ""
                self._held_messages = self._held_messages[:-1] + joiner + appended[1:]
        else:
            self._held_messages = view.messages_json
        canonical = (
            f'{{"format":"{self.format_name}","system":{view.system_json or "null"},'
            f'"tools":{view.tools_json},"messages":{self._held_messages}}}'
        )
        if hashlib.sha256(canonical.encode()).hexdigest() != view.request_hash:
            self.run.hash_mismatches.append(f"version {view.version} (appended={view.appended})")
        if view.estimated_tokens > view.budget_tokens:
            self.run.over_budget.append(
                f"version {view.version}: {view.estimated_tokens} > {view.budget_tokens}"
            )
        self._held = view
        return view

    # -- the provider -----------------------------------------------------------------------

    def _path(self) -> str:
        return "/v1/messages" if self.format == PromptFormat.ANTHROPIC else "/v1/chat/completions"

    def _request(self, view: PromptView) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": AGENT_MODEL,
            "max_tokens": ANSWER_TOKENS,
            "messages": json.loads(self._held_messages),
        }
        tools = json.loads(view.tools_json or "[]")
        if tools:
            body["tools"] = tools
        if self.format == PromptFormat.ANTHROPIC and view.system_json:
            body["system"] = json.loads(view.system_json)
        return body


def _is_overflow(reply: dict[str, Any]) -> bool:
    error = reply.get("error") or {}
    message = str(error.get("message", ""))
    return (
        error.get("code") == "context_length_exceeded"
        or "too long" in message
        or ("exceed context limit" in message)
    )


class _Http:
    """One keep-alive connection to the provider, as SDK clients hold."""

    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        self._connection = http.client.HTTPConnection(parsed.hostname or "", parsed.port)

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "x-api-key": "sk-loop"}
        self._connection.request("POST", path, data, headers)
        response = self._connection.getresponse()
        return response.status, json.loads(response.read())
