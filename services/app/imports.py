"""Importing agent transcripts as sessions, and exporting sessions as pi files.

A transcript is read into the common representation
(``services.adapters.transcripts``), then replayed through the Session
aggregate's own commands, so an imported session obeys every rule an
appended one does: one event per record, each carrying the record's
original time (the library lets an event be given its timestamp), so the
session replays "as of" any time in its own history. What the store would
refuse is made acceptable without losing anything: tool calls the transcript
never answered are closed by a ``ToolCallsAbandoned`` event, turns without
content are kept as custom entries, and the session's ``max_entry_bytes`` is
raised to hold the largest entry.

A file is a tree (pi branches in place): the branch leading to the file's
last record becomes the session, and every other leaf a fork of it, forked
where its branch leaves the main one. Everything is built in memory and
saved in one insert: a bad file imports nothing, and the error names its line.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from domain.errors import DomainError, InvalidRequest, SessionExists, quoted
from domain.ids import new_id
from domain.session import Session
from domain.settings import SessionSettings
from domain.storable import check_tree
from services.adapters.tokenizers import tokenizer_for
from services.adapters.transcripts import Transcript, TranscriptError, read_transcript
from services.adapters.transcripts.ir import Record
from services.adapters.transcripts.pi_export import export_lines
from services.app.sessions import SessionService
from services.app.transcript_builder import TranscriptBuilder

EXPORT_CHUNK_BYTES = 1 << 20
ENTRY_BYTES_STEP = 1 << 16
_NOT_ID = re.compile(r"[^A-Za-z0-9._:@-]")


@dataclass(frozen=True)
class ImportedSession:
    session: Session
    entries: int
    compactions: int
    abandoned_tool_calls: int
    lines: int
    branch_point_entry_id: str = ""


@dataclass(frozen=True)
class ImportResult:
    format: str
    sessions: Sequence[ImportedSession]
    bytes: int
    # The position of the import's last event, for a client to wait on.
    position: int = 0


class ImportService:
    def __init__(self, sessions: SessionService) -> None:
        self.sessions = sessions

    def import_transcript(
        self,
        data: bytes,
        file_format: str,
        *,
        session_id: str = "",
        choose: Callable[[SessionSettings], SessionSettings] = lambda s: s,
        file_name: str = "",
    ) -> ImportResult:
        transcript = read_transcript(data, file_format, file_name)
        # A pi file's header alone is a session with no entries yet (the export of
        # one, say); any other file without records holds nothing to import.
        if not transcript.records and transcript.format not in ("pi", "openclaw"):
            raise TranscriptError(0, "the file holds no entries to import")
        # The session's stream: the one asked for, else the file's id, else a new one,
        # in the caller's tenant; its forks' are in the same tenant.
        ids = self.sessions.ids
        main_id = session_id or ids.stream(transcript.session_id or new_id())
        tenant, own_id = ids.tenant_and_id(main_id)
        paths = _branches(transcript) if transcript.records else [[]]

        def settings_for(defaults: SessionSettings) -> SessionSettings:
            labels = {**defaults.labels, **transcript.labels}
            from_file = replace(
                defaults,
                model=transcript.model or defaults.model,
                labels=_labels(labels),
            )
            return choose(from_file)

        settings, window, limit = self.sessions.new_session_settings(settings_for)
        _check_strings(transcript, limit)
        needed = max(
            (r.entry.content_bytes() for r in transcript.records if r.entry is not None),
            default=0,
        )
        if needed > settings.max_entry_bytes:
            if needed > limit:
                line = next(
                    r.line
                    for r in transcript.records
                    if r.entry is not None and r.entry.content_bytes() == needed
                )
                raise TranscriptError(
                    line, f"the entry is {needed:,} bytes; this server takes at most {limit:,}"
                )
            raised = -(-needed // ENTRY_BYTES_STEP) * ENTRY_BYTES_STEP
            settings = replace(settings, max_entry_bytes=min(raised, limit))
        tokenizer = tokenizer_for(settings.model)
        now = datetime.now(UTC)
        main_path = paths[0]
        started = _start_time(transcript, main_path, now)
        try:
            session = Session.start(
                main_id,
                settings,
                window,
                max_entry_bytes_limit=limit,
                timestamp=started,
                tenant=tenant,
            )
        except DomainError as error:
            raise InvalidRequest(f"the imported session's settings: {error}") from None
        main = TranscriptBuilder(session, tokenizer, now)
        for record in main_path:
            main.add(record)
        main.finish()
        built = [
            (
                main,
                ImportedSession(
                    session, main.entries, main.compactions, main.abandoned, transcript.lines
                ),
            )
        ]
        on_main = {r.id for r in main_path}
        fork_suffixes: set[str] = set()
        main_events = list(session.pending_events)
        for path in paths[1:]:
            leaf = path[-1]
            split = max((i for i, r in enumerate(path) if r.id in on_main), default=-1)
            fork_version = main.version_of.get(path[split].id, 1) if split >= 0 else 1
            fork_id = ids.in_tenant(tenant, _fork_id(own_id, leaf.id, fork_suffixes))
            fork = Session.fork(fork_id, main_events[:fork_version], tenant)  # type: ignore[arg-type]
            builder = TranscriptBuilder(fork, tokenizer, now)
            builder.version_of.update(
                {k: v for k, v in main.version_of.items() if v <= fork_version}
            )
            builder.aliases.update(main.aliases)
            for record in path[split + 1 :]:
                builder.add(record)
            builder.finish()
            built.append(
                (
                    builder,
                    ImportedSession(
                        fork,
                        builder.entries,
                        builder.compactions,
                        builder.abandoned,
                        transcript.lines,
                        path[split].id if split >= 0 else "",
                    ),
                )
            )
        for builder, _ in built:
            builder.check_servable()
        try:
            position = self.sessions.save_new_sessions([(b.session, b.history) for b, _ in built])
        except SessionExists as error:
            raise SessionExists(
                f"{error}: import the file under another id (the header's session_id, "
                "`sessionstore import --id`)"
            ) from None
        return ImportResult(
            transcript.format, [summary for _, summary in built], len(data), position
        )

    def export_pi(self, session_id: str, version: int | None = None) -> Iterator[bytes]:
        """The session (as of ``version``) as a pi v3 file, in chunks of 1 MiB at most
        (less where one message carries less). Chunks are the file's bytes in order: a
        line may span several, since one entry's line can be larger than a message."""
        events = self.sessions.events_upto(session_id, version)
        chunk = min(EXPORT_CHUNK_BYTES, self.sessions.rules.max_content_bytes)
        buffer = bytearray()
        for line in export_lines(self.sessions.ids.client(session_id), events):
            buffer += line.encode()
            buffer += b"\n"
            while len(buffer) >= chunk:
                yield bytes(buffer[:chunk])
                del buffer[:chunk]
        if buffer:
            yield bytes(buffer)


def _check_strings(transcript: Transcript, content_chars: int) -> None:
    """The file's strings, checked as a request's are: what no store can hold is
    refused with its line."""
    try:
        for name in ("model", "title", "labels"):
            check_tree(getattr(transcript, name), name, content_chars, name)
    except InvalidRequest as error:
        raise TranscriptError(0, f"the session's {error}") from None
    for record in transcript.records:
        try:
            check_tree(record.entry or record.compaction, "", content_chars)
            check_tree(record.id, "id", content_chars, "id")
            check_tree(record.abandoned_reason or "", "reason", content_chars, "abandoned_reason")
        except InvalidRequest as error:
            raise TranscriptError(record.line, str(error)) from None


def _labels(labels: dict[str, str]) -> dict[str, str]:
    from types import MappingProxyType

    return MappingProxyType(labels)  # type: ignore[return-value]


def _start_time(transcript: Transcript, path: Sequence[Record], now: datetime) -> datetime:
    times = [r.timestamp for r in path if r.timestamp is not None]
    if transcript.started_at is not None:
        times.append(transcript.started_at)
    return min(times) if times else now


def _fork_id(main_id: str, leaf_id: str, taken: set[str]) -> str:
    """``main@leaf``, the leaf's id made fit for an id. Leaves whose ids come out the
    same ('a b' and 'a_b', two long ids alike in their first 40 characters) would
    name one session: a later one's ends in a hash of its own id instead."""
    suffix = _NOT_ID.sub("_", leaf_id)[:40]
    if suffix in taken:
        suffix = f"{suffix[:31]}-{hashlib.sha256(leaf_id.encode()).hexdigest()[:8]}"
    taken.add(suffix)
    return f"{main_id[: 127 - len(suffix)]}@{suffix}"


def _branches(transcript: Transcript) -> list[list[Record]]:
    """Root-to-leaf paths: first the one to the file's last record, then every
    other leaf's, in file order."""
    by_id: dict[str, Record] = {}
    for record in transcript.records:
        if record.id in by_id:
            raise TranscriptError(
                record.line,
                f"id {quoted(record.id)} is already used on line {by_id[record.id].line}",
            )
        by_id[record.id] = record
    has_children: set[str] = set()
    for record in transcript.records:
        if record.parent_id is not None:
            if record.parent_id not in by_id:
                raise TranscriptError(
                    record.line, f"parentId {quoted(record.parent_id)} is not an entry of this file"
                )
            has_children.add(record.parent_id)

    def path(leaf: Record) -> list[Record]:
        chain: list[Record] = []
        seen: set[str] = set()
        current: Record | None = leaf
        while current is not None:
            if current.id in seen:
                raise TranscriptError(current.line, f"parentId chain of {quoted(current.id)} loops")
            seen.add(current.id)
            chain.append(current)
            current = by_id[current.parent_id] if current.parent_id else None
        chain.reverse()
        return chain

    last = transcript.records[-1]
    others = [r for r in transcript.records if r.id not in has_children and r is not last]
    return [path(last), *(path(leaf) for leaf in others)]
