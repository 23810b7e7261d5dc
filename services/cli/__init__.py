"""`sessionstore`: the session store's gRPC API as a command line, for people.

Each command makes one or two calls and prints the answer as aligned, compact
text. `--json` prints the API's own responses instead (one JSON object per line
for event streams), for scripts. Failures print one line on stderr and exit 1
when the server refused the request, 2 when the server could not be reached.

    sessionstore create --title "bug triage"
    sessionstore append SESSION --role user "why does the build fail?"
    sessionstore log SESSION
    sessionstore events SESSION --follow
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc

DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_TIMEOUT_SECONDS = 10.0
# The server's own default for a soft trim (domain.pruning.PruneDecision).
DEFAULT_TRIM_CHARS = 1_500
EXIT_REFUSED = 1
EXIT_UNREACHABLE = 2

_FORMATS = {"openai": pb.PROMPT_FORMAT_OPENAI, "anthropic": pb.PROMPT_FORMAT_ANTHROPIC}
_ROLES = {
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
    "system": pb.ROLE_SYSTEM,
    "custom": pb.ROLE_CUSTOM,
}

F = TypeVar("F", bound=Callable[..., Any])


# -- the connection -----------------------------------------------------------------


@dataclass
class Client:
    """What every command needs: where the server is, and how to print."""

    address: str
    timeout: float
    as_json: bool
    _channel: grpc.Channel | None = field(default=None, repr=False)
    _stub: Any = field(default=None, repr=False)

    @property
    def stub(self) -> Any:
        # Connect on first use, so `--help` and usage errors never touch the network.
        if self._stub is None:
            self._channel = grpc.insecure_channel(self.address)
            self._stub = pb_grpc.SessionStoreStub(self._channel)
        return self._stub

    def call(self, method: str, request: Message) -> Any:
        # wait_for_ready=False fails at once when nothing listens, instead of
        # waiting out the deadline; the deadline covers a server that hangs.
        rpc = getattr(self.stub, method)
        return rpc(request, timeout=self.timeout, wait_for_ready=False)

    def stream(self, method: str, request: Message, *, deadline: bool = True) -> Any:
        rpc = getattr(self.stub, method)
        return rpc(request, timeout=self.timeout if deadline else None, wait_for_ready=False)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()


class _Cli(click.Group):
    """Turns a failed call into one line on stderr and an exit code, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except grpc.RpcError as error:
            client = ctx.obj if isinstance(ctx.obj, Client) else None
            raise click.exceptions.Exit(_report(error, client)) from None


def _report(error: grpc.RpcError, client: Client | None) -> int:
    code = error.code() if isinstance(error, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (error.details() if isinstance(error, grpc.Call) else None) or str(error)
    address = client.address if client else "?"
    if code is grpc.StatusCode.UNAVAILABLE:
        click.echo(
            f"error: UNAVAILABLE: cannot reach the session store at {address} ({details})",
            err=True,
        )
        return EXIT_UNREACHABLE
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        timeout = client.timeout if client else DEFAULT_TIMEOUT_SECONDS
        click.echo(
            f"error: DEADLINE_EXCEEDED: no answer from the session store at {address} "
            f"within {timeout:g}s "
            "(--timeout waits longer)",
            err=True,
        )
        return EXIT_UNREACHABLE
    click.echo(f"error: {code.name}: {details}", err=True)
    if code is grpc.StatusCode.ABORTED:
        click.echo(
            "hint: the session moved on since you read it; re-read it with `show` or `log` "
            "and retry with its current version as --expected-version",
            err=True,
        )
    return EXIT_REFUSED


def _print_json(message: Message, *, one_line: bool = False) -> None:
    # Zero counts printed, not left out, so a script reading `entryCount` finds 0.
    text = json_format.MessageToJson(
        message,
        indent=None if one_line else 2,
        ensure_ascii=False,
        always_print_fields_with_no_presence=True,
    )
    click.echo(text)


# -- text helpers -------------------------------------------------------------------


def _width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def _clip(text: str, limit: int) -> str:
    """The first line of text, cut to limit characters; … says something was left out."""
    stripped = text.strip()
    line, _, rest = stripped.partition("\n")
    limit = max(limit, 8)
    if len(line) > limit:
        return line[: limit - 1] + "…"
    return line + "…" if rest else line


def _table(rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> list[str]:
    """Rows with aligned columns; the last column is left ragged."""
    if not rows:
        return []
    right = set(right)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row[:-1])
        ]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def _echo_fields(fields: Sequence[tuple[str, str]]) -> None:
    for line in _table([(name, value) for name, value in fields if value]):
        click.echo(line)


def _time(timestamp: Timestamp) -> str:
    # Local time, as a person at the terminal reads it; --json keeps UTC.
    if not (timestamp.seconds or timestamp.nanos):
        return "-"
    return timestamp.ToDatetime(tzinfo=UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _role(entry: pb.Entry) -> str:
    name = pb.Role.Name(entry.role).removeprefix("ROLE_").lower()
    return f"{name}:{entry.custom_type}" if entry.custom_type else name


def _count(number: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{number:,} {noun if number == 1 else plural}"


def _short(identifier: str) -> str:
    return identifier[:8]


def _block_summary(block: pb.ContentBlock, limit: int) -> str:
    kind = block.WhichOneof("block")
    if kind == "text":
        return _clip(block.text.text, limit)
    if kind == "thinking":
        return "(thinking) " + _clip(block.thinking.thinking, limit - 11)
    if kind == "tool_call":
        call = block.tool_call
        return _clip(f"→ {call.name}({call.arguments_json})", limit)
    if kind == "tool_result":
        result = block.tool_result
        prefix = f"← {result.tool_call_id}{' (error)' if result.is_error else ''}: "
        return prefix + (_clip(result.content, limit - len(prefix)) or "(empty)")
    if kind == "image":
        return _clip(f"[image {block.image.uri}]", limit)
    return "(empty block)"


def _entry_summary(entry: pb.Entry, limit: int) -> str:
    parts = [_block_summary(b, limit) for b in entry.content]
    return _clip("  ".join(parts), limit) if len(parts) > 1 else "".join(parts)


def _entry_rows(entries: Sequence[pb.Entry]) -> list[list[str]]:
    """`#version  role  id  tokens  summary` rows; the summary gets what is left of the line."""
    columns = [[f"#{e.version}", _role(e), _short(e.id), f"{e.token_count:,}"] for e in entries]
    used = sum(max((len(row[i]) for row in columns), default=0) + 2 for i in range(4))
    limit = _width() - used
    return [[*row, _entry_summary(e, limit)] for row, e in zip(columns, entries, strict=True)]


def _read_text(text: str | None) -> str | None:
    """TEXT as given, or standard input when it is "-" (for long or multi-line content)."""
    return sys.stdin.read() if text == "-" else text


# -- shared options -----------------------------------------------------------------


class _Moment(click.ParamType):
    """An ISO 8601 time; one without an offset is local time."""

    name = "ISO8601"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 time, e.g. 2025-01-31T14:05:00Z", param, ctx)
        return moment if moment.tzinfo else moment.astimezone()


def _as_of_options(command: F) -> F:
    command = click.option(
        "--at-time", type=_Moment(), help="As it was at this time (ISO 8601; local if no offset)."
    )(command)
    return click.option(
        "--at-version", type=click.IntRange(min=1), help="As it was at this version."
    )(command)


def _set_as_of(
    request: pb.GetViewRequest | pb.GetPromptViewRequest,
    at_version: int | None,
    at_time: datetime | None,
) -> None:
    if at_version is not None and at_time is not None:
        raise click.UsageError("give --at-version or --at-time, not both")
    if at_version is not None:
        request.version = at_version
    elif at_time is not None:
        request.time.FromDatetime(at_time)


def _format_option(command: F) -> F:
    return click.option(
        "--format",
        "prompt_format",
        type=click.Choice(sorted(_FORMATS)),
        default="openai",
        show_default=True,
        help="The provider's message format.",
    )(command)


def _expected_version_option(command: F) -> F:
    return click.option(
        "--expected-version",
        type=click.IntRange(min=0),
        help="Refuse (ABORTED) unless the session is at this version.",
    )(command)


# -- the commands -------------------------------------------------------------------


@click.group(cls=_Cli)
@click.option(
    "--address",
    envvar="SESSIONSTORE_ADDRESS",
    show_envvar=True,
    default=DEFAULT_ADDRESS,
    show_default=True,
    help="host:port of the server.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the API's responses as JSON.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_SECONDS,
    show_default=True,
    help="Seconds to wait for each answer.",
)
@click.pass_context
def cli(ctx: click.Context, address: str, as_json: bool, timeout: float) -> None:
    """Read and write the sessions of a session store server."""
    client = Client(address, timeout, as_json)
    ctx.obj = client
    ctx.call_on_close(client.close)


pass_client = click.make_pass_decorator(Client)


@cli.command()
@click.option("--id", "session_id", default="", help="The session's id; generated if left out.")
@click.option("--model", help="Conversation model, e.g. gpt-4o; the server's default if unset.")
@click.option("--window", type=click.IntRange(min=1), help="Context window in tokens.")
@click.option("--title")
@pass_client
def create(
    client: Client, session_id: str, model: str | None, window: int | None, title: str | None
) -> None:
    """Start a new session."""
    settings = pb.SessionSettings(model=model, context_window_tokens=window, title=title)
    session: pb.Session = client.call(
        "CreateSession", pb.CreateSessionRequest(session_id=session_id, settings=settings)
    )
    if client.as_json:
        return _print_json(session)
    click.echo(f"created {session.id} (version {session.version})")
    click.echo(
        f"model {session.settings.model}, window {session.settings.context_window_tokens:,} "
        f"tokens (from {session.context_window_source})"
    )


@cli.command("list")
@click.option("--limit", type=click.IntRange(min=1), help="Show at most this many sessions.")
@pass_client
def list_sessions(client: Client, limit: int | None) -> None:
    """List sessions, oldest first."""
    found = pb.ListSessionsResponse()
    token = ""
    while limit is None or len(found.sessions) < limit:
        page: pb.ListSessionsResponse = client.call(
            "ListSessions", pb.ListSessionsRequest(page_size=500, page_token=token)
        )
        found.sessions.extend(page.sessions)
        token = page.next_page_token
        if not token:
            break
    if limit is not None:
        del found.sessions[limit:]
    if client.as_json:
        return _print_json(found)
    if not found.sessions:
        return click.echo("no sessions")
    header = ["ID", "VERSION", "ENTRIES", "TOKENS", "MODEL", "UPDATED", "TITLE"]
    rows = [header] + [
        [
            s.id,
            str(s.version),
            str(s.entry_count),
            f"{s.total_tokens:,}",
            s.settings.model,
            _time(s.updated_at),
            s.settings.title,
        ]
        for s in found.sessions
    ]
    for line in _table(rows, right={1, 2, 3}):
        click.echo(line)


@cli.command()
@click.argument("session")
@pass_client
def show(client: Client, session: str) -> None:
    """Show a session's settings, version and totals."""
    found: pb.Session = client.call("GetSession", pb.GetSessionRequest(session_id=session))
    if client.as_json:
        return _print_json(found)
    usage = found.total_usage
    _echo_fields(
        [
            ("session", found.id),
            ("title", found.settings.title),
            ("model", found.settings.model),
            (
                "window",
                f"{found.settings.context_window_tokens:,} tokens "
                f"(from {found.context_window_source})",
            ),
            ("version", str(found.version)),
            ("entries", str(found.entry_count)),
            ("tokens", f"{found.total_tokens:,}"),
            (
                "usage",
                f"in {usage.input_tokens:,}  out {usage.output_tokens:,}  "
                f"cache read {usage.cache_read_tokens:,}  "
                f"cache write {usage.cache_write_tokens:,}",
            ),
            ("compactions", str(found.compaction_count)),
            ("open tool calls", ", ".join(found.open_tool_call_ids) or "none"),
            ("last entry", found.last_entry_id),
            ("created", _time(found.created_at)),
            ("updated", _time(found.updated_at)),
        ]
    )


@cli.command()
@click.argument("session")
@click.argument("text", required=False)
@click.option(
    "--role",
    type=click.Choice(sorted(_ROLES)),
    help="Role of a plain entry with TEXT [default: user].",
)
@click.option("--tool-call", "tool_name", metavar="NAME", help="Append an assistant tool call.")
@click.option("--args", "arguments", metavar="JSON", help="The tool call's arguments object.")
@click.option("--call-id", help="The tool call's id; generated if left out.")
@click.option(
    "--tool-result", "answers", metavar="CALL_ID", help="Append TEXT as this call's result."
)
@click.option("--error", "is_error", is_flag=True, help="The tool result is an error.")
@click.option("--custom-type", default="", help="What kind of note a custom entry is.")
@click.option("--id", "entry_id", default="", help="The entry's id; generated if left out.")
@click.option("--idempotency-key", default="", help="Retries with this key append only once.")
@_expected_version_option
@pass_client
def append(
    client: Client,
    session: str,
    text: str | None,
    role: str | None,
    tool_name: str | None,
    arguments: str | None,
    call_id: str | None,
    answers: str | None,
    is_error: bool,
    custom_type: str,
    entry_id: str,
    idempotency_key: str,
    expected_version: int | None,
) -> None:
    """Append one entry.

    TEXT "-" reads the text from standard input.

    \b
      append S --role user "hello"
      append S --tool-call read_file --args '{"path": "a.py"}'
      append S --tool-result CALL_ID "file contents"
    """
    _check_append_options(role, tool_name, arguments, call_id, answers, is_error, custom_type)
    text = _read_text(text)
    if tool_name is not None:
        call_id = call_id or _call_id(session, idempotency_key)
        entry = _tool_call_entry(tool_name, arguments or "{}", call_id, text)
    elif answers is not None:
        entry = _tool_result_entry(answers, _required_text(text), is_error)
    else:
        entry = pb.Entry(role=_ROLES[role or "user"], content=[_text_block(_required_text(text))])
    entry.id = entry_id
    entry.custom_type = custom_type
    request = pb.AppendEntriesRequest(
        session_id=session,
        entries=[entry],
        expected_version=expected_version,
        idempotency_key=idempotency_key,
    )
    response: pb.AppendEntriesResponse = client.call("AppendEntries", request)
    if client.as_json:
        return _print_json(response)
    click.echo(
        f"appended {response.entry_ids[0]} at version {response.version} "
        f"({response.token_counts[0]:,} tokens)"
    )
    if tool_name is not None:
        click.echo(f"tool call id {call_id}")
    if response.replayed:
        click.echo("(retry: answered from the first append)")


def _check_append_options(
    role: str | None,
    tool_name: str | None,
    arguments: str | None,
    call_id: str | None,
    answers: str | None,
    is_error: bool,
    custom_type: str,
) -> None:
    """Refuses option mixes that would not say what kind of entry to append."""
    if tool_name is not None and answers is not None:
        raise click.UsageError("append a --tool-call or a --tool-result, not both at once")
    if tool_name is not None and role not in (None, "assistant"):
        raise click.UsageError("a --tool-call entry is an assistant entry; drop --role")
    if answers is not None and role is not None:
        raise click.UsageError("a --tool-result entry has role tool; drop --role")
    if tool_name is None and (arguments is not None or call_id is not None):
        raise click.UsageError("--args and --call-id go with --tool-call")
    if is_error and answers is None:
        raise click.UsageError("--error goes with --tool-result")
    if custom_type and role != "custom":
        raise click.UsageError("--custom-type goes with --role custom")


def _required_text(text: str | None) -> str:
    if text is None:
        raise click.UsageError('give the entry\'s TEXT (or "-" to read standard input)')
    return text


def _call_id(session: str, idempotency_key: str) -> str:
    # A retry must send the very same entry, or the server refuses the reused
    # key; so with a key the call id is derived from it, not drawn at random.
    if idempotency_key:
        digest = hashlib.sha256(f"{session}\0{idempotency_key}".encode()).hexdigest()
        return "call_" + digest[:24]
    return "call_" + uuid.uuid4().hex[:24]


def _text_block(text: str) -> pb.ContentBlock:
    return pb.ContentBlock(text=pb.TextBlock(text=text))


def _tool_call_entry(name: str, arguments: str, call_id: str, text: str | None) -> pb.Entry:
    # Checked here too so a typo in the shell gets pointed at before the round trip.
    try:
        parsed = json.loads(arguments)
    except ValueError as error:
        raise click.BadParameter(f"not valid JSON ({error})", param_hint="--args") from None
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--args")
    call = pb.ToolCallBlock(id=call_id, name=name, arguments_json=arguments)
    content = [_text_block(text)] if text else []
    content.append(pb.ContentBlock(tool_call=call))
    return pb.Entry(role=pb.ROLE_ASSISTANT, content=content)


def _tool_result_entry(call_id: str, output: str, is_error: bool) -> pb.Entry:
    result = pb.ToolResultBlock(tool_call_id=call_id, content=output, is_error=is_error)
    return pb.Entry(role=pb.ROLE_TOOL, content=[pb.ContentBlock(tool_result=result)])


@cli.command()
@click.argument("session")
@_as_of_options
@pass_client
def log(client: Client, session: str, at_version: int | None, at_time: datetime | None) -> None:
    """Show the durable log.

    The latest compaction summary, if any, then the entries it kept.
    """
    request = pb.GetViewRequest(session_id=session)
    _set_as_of(request, at_version, at_time)
    found: pb.DurableLog = client.call("GetDurableLog", request)
    if client.as_json:
        return _print_json(found)
    click.echo(
        f"{found.session_id} at version {found.version}: {_count(len(found.entries), 'entry')}, "
        f"{found.total_tokens:,} tokens"
    )
    if found.HasField("compaction"):
        _echo_compaction(found.compaction)
    for line in _table(_entry_rows(found.entries), right={3}):
        click.echo(line)


def _echo_compaction(compaction: pb.Compaction) -> None:
    click.echo(
        f"compacted at version {compaction.version} ({compaction.reason}): entries before "
        f"{_short(compaction.first_kept_entry_id)} summarised in "
        f"{compaction.summary_tokens:,} tokens"
    )
    click.echo("  summary: " + _clip(compaction.summary, _width() - 11))


@cli.command()
@click.argument("session")
@_format_option
@_as_of_options
@pass_client
def prompt(
    client: Client,
    session: str,
    prompt_format: str,
    at_version: int | None,
    at_time: datetime | None,
) -> None:
    """Show the prompt view.

    The messages to send the model, with pruning applied.
    """
    request = pb.GetPromptViewRequest(session_id=session, format=_FORMATS[prompt_format])
    _set_as_of(request, at_version, at_time)
    view: pb.PromptView = client.call("GetPromptView", request)
    if client.as_json:
        return _print_json(view)
    click.echo(f"{view.session_id} at version {view.version}, {prompt_format} format")
    _echo_prompt(view)


def _echo_prompt(view: pb.PromptView) -> None:
    window = view.context_window_tokens
    share = f" ({view.estimated_tokens / window:.1%})" if window else ""
    click.echo(f"estimated {view.estimated_tokens:,} of {window:,} tokens{share}")
    for pruned in view.pruned:
        click.echo(f"pruned {pruned.entry_id}: {_prune_action(pruned)}")
    if view.system_json:
        click.echo("system:")
        click.echo(_pretty_json(view.system_json))
    click.echo("messages:")
    click.echo(_pretty_json(view.messages_json))


def _pretty_json(text: str) -> str:
    return json.dumps(json.loads(text), indent=2, ensure_ascii=False)


def _prune_verb(pruned: pb.PrunedEntry) -> str:
    return "cleared" if pruned.action == pb.PRUNE_ACTION_HARD_CLEAR else "trimmed"


def _prune_action(pruned: pb.PrunedEntry) -> str:
    if pruned.action == pb.PRUNE_ACTION_HARD_CLEAR:
        return "cleared"
    return f"trimmed to first {pruned.head_chars:,} and last {pruned.tail_chars:,} chars"


@cli.command()
@click.argument("session")
@click.argument("version", type=click.IntRange(min=1))
@_format_option
@pass_client
def replay(client: Client, session: str, version: int, prompt_format: str) -> None:
    """Show the prompt view as it was at VERSION."""
    request = pb.GetPromptViewRequest(
        session_id=session, version=version, format=_FORMATS[prompt_format]
    )
    view: pb.PromptView = client.call("GetPromptView", request)
    if client.as_json:
        return _print_json(view)
    current: pb.Session = client.call("GetSession", pb.GetSessionRequest(session_id=session))
    click.echo(
        f"{view.session_id} as of version {view.version} of {current.version}, "
        f"{prompt_format} format"
    )
    _echo_prompt(view)


@cli.command("entry")
@click.argument("session")
@click.argument("entry_id")
@pass_client
def show_entry(client: Client, session: str, entry_id: str) -> None:
    """Show one entry in full.

    The whole content, even if it was compacted away or pruned since.
    """
    found: pb.Entry = client.call(
        "GetEntry", pb.GetEntryRequest(session_id=session, entry_id=entry_id)
    )
    if client.as_json:
        return _print_json(found)
    usage = found.usage
    _echo_fields(
        [
            ("entry", found.id),
            ("role", _role(found)),
            ("version", str(found.version)),
            ("parent", found.parent_id),
            ("time", _time(found.timestamp)),
            ("tokens", f"{found.token_count:,} ({found.tokenizer})"),
            (
                "usage",
                f"in {usage.input_tokens:,}  out {usage.output_tokens:,}"
                if found.HasField("usage")
                else "",
            ),
            ("metadata", ", ".join(f"{k}={v}" for k, v in sorted(found.metadata.items()))),
        ]
    )
    for block in found.content:
        click.echo()
        click.echo(_block_in_full(block))


def _block_in_full(block: pb.ContentBlock) -> str:
    kind = block.WhichOneof("block")
    if kind == "text":
        return block.text.text
    if kind == "thinking":
        return "(thinking)\n" + block.thinking.thinking
    if kind == "tool_call":
        call = block.tool_call
        try:
            arguments = _pretty_json(call.arguments_json)
        except ValueError:
            arguments = call.arguments_json
        return f"→ {call.name} (call {call.id})\n{arguments}"
    if kind == "tool_result":
        result = block.tool_result
        error = " (error)" if result.is_error else ""
        return f"← result of {result.tool_call_id}{error}\n{result.content}"
    if kind == "image":
        media = f" ({block.image.media_type})" if block.image.media_type else ""
        return f"[image {block.image.uri}{media}]"
    return "(empty block)"


@cli.command()
@click.argument("session")
@click.option("--after", type=click.IntRange(min=0), default=0, help="Only events after this.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until Ctrl-C.")
@pass_client
def events(client: Client, session: str, after: int, follow: bool) -> None:
    """List the session's events, one a line."""
    request = pb.ReadEventsRequest(session_id=session, after_version=after, follow=follow)
    # A followed stream is open-ended; only a bounded read gets a deadline.
    call = client.stream("ReadEvents", request, deadline=not follow)
    try:
        for event in call:
            if client.as_json:
                _print_json(event, one_line=True)
            else:
                click.echo(_event_line(event))
    except KeyboardInterrupt:
        # Ctrl-C is how a follow ends: hang up so the server stops waiting.
        call.cancel()
        return
    if follow:
        # A followed stream only ends this way when the server shuts down.
        click.echo("(the server ended the stream)", err=True)


def _event_line(event: pb.SessionEvent) -> str:
    kind, summary = _event_summary(event)
    # Fixed widths, not a table: a followed stream cannot look ahead.
    prefix = f"{'#' + str(event.version):<4}  {_time(event.timestamp)}  {kind:<9}  "
    return prefix + _clip(summary, _width() - len(prefix))


def _event_summary(event: pb.SessionEvent) -> tuple[str, str]:
    which = event.WhichOneof("event")
    if which == "started":
        return "started", _settings_summary(event.started.settings)
    if which == "entries_appended":
        appended = event.entries_appended
        first = appended.entries[0]
        more = f" (+{len(appended.entries) - 1} more)" if len(appended.entries) > 1 else ""
        key = f" [key {appended.idempotency_key}]" if appended.idempotency_key else ""
        text = _entry_summary(first, _width())
        return "appended", f"{_role(first)} {_short(first.id)}{key}{more}: {text}"
    if which == "compaction_recorded":
        compaction = event.compaction_recorded
        return "compacted", (
            f"kept from {_short(compaction.first_kept_entry_id)} ({compaction.reason}): "
            f"{_clip(compaction.summary, _width())}"
        )
    if which == "prune_recorded":
        prune = event.prune_recorded
        pruned = ", ".join(f"{_short(p.entry_id)} {_prune_verb(p)}" for p in prune.entries)
        return "pruned", pruned + (f" ({prune.reason})" if prune.reason else "")
    if which == "settings_changed":
        return "settings", _settings_summary(event.settings_changed.settings)
    return "unknown", "(an event this client does not know)"


def _settings_summary(settings: pb.SessionSettings) -> str:
    parts = [f"model {settings.model}"]
    if settings.context_window_tokens:
        parts.append(f"window {settings.context_window_tokens:,}")
    if settings.title:
        parts.append(f"title {settings.title!r}")
    return ", ".join(parts)


@cli.command()
@click.argument("session")
@click.option("--summary", required=True, help='The summary; "-" reads standard input.')
@click.option("--first-kept", required=True, metavar="ENTRY_ID", help="The first entry to keep.")
@click.option("--reason", default="manual", show_default=True)
@_expected_version_option
@pass_client
def compact(
    client: Client,
    session: str,
    summary: str,
    first_kept: str,
    reason: str,
    expected_version: int | None,
) -> None:
    """Record a compaction.

    The summary replaces, in the durable log, the entries before --first-kept.
    """
    request = pb.RecordCompactionRequest(
        session_id=session,
        summary=_read_text(summary) or "",
        first_kept_entry_id=first_kept,
        reason=reason,
        expected_version=expected_version,
    )
    response: pb.RecordCompactionResponse = client.call("RecordCompaction", request)
    if client.as_json:
        return _print_json(response)
    _echo_compaction(response.compaction)


@cli.command()
@click.argument("session")
@click.argument("entry_ids", nargs=-1, required=True, metavar="ENTRY_ID...")
@click.option("--clear", is_flag=True, help="Replace the whole result with a placeholder.")
@click.option("--head", type=click.IntRange(min=0), help="Characters kept from the start.")
@click.option("--tail", type=click.IntRange(min=0), help="Characters kept from the end.")
@click.option("--reason", default="", help="Why, for the record.")
@_expected_version_option
@pass_client
def prune(
    client: Client,
    session: str,
    entry_ids: tuple[str, ...],
    clear: bool,
    head: int | None,
    tail: int | None,
    reason: str,
    expected_version: int | None,
) -> None:
    """Trim or clear tool results.

    Only the prompt view changes: the log and `entry` keep the results whole.
    Without --clear each result is trimmed to its first --head and last --tail
    characters (1,500 each by default).
    """
    if clear and (head is not None or tail is not None):
        raise click.UsageError("--clear drops the whole result; --head/--tail are for trimming")
    pruned = [_pruned_entry(entry_id, clear, head, tail) for entry_id in entry_ids]
    request = pb.RecordPruneRequest(
        session_id=session, entries=pruned, reason=reason, expected_version=expected_version
    )
    response: pb.RecordPruneResponse = client.call("RecordPrune", request)
    if client.as_json:
        return _print_json(response)
    click.echo(f"pruned {_count(len(pruned), 'entry')} at version {response.version}")
    for decision in pruned:
        click.echo(f"  {decision.entry_id}: {_prune_action(decision)}")


def _pruned_entry(entry_id: str, clear: bool, head: int | None, tail: int | None) -> pb.PrunedEntry:
    if clear:
        return pb.PrunedEntry(entry_id=entry_id, action=pb.PRUNE_ACTION_HARD_CLEAR)
    # The API takes 0 literally, so the usual amounts are filled in here.
    return pb.PrunedEntry(
        entry_id=entry_id,
        action=pb.PRUNE_ACTION_SOFT_TRIM,
        head_chars=DEFAULT_TRIM_CHARS if head is None else head,
        tail_chars=DEFAULT_TRIM_CHARS if tail is None else tail,
    )


def main() -> None:
    cli(prog_name="sessionstore")


if __name__ == "__main__":
    main()
