"""Every acknowledged append against the stored stream, read back through the API.

Each session's events come from ReadEvents and its entries from GetDurableLog
(on the servers in turn, so each answers from the shared database); the
events table itself must hold the same number of rows, versions 1..N. The
stream must hold every acknowledged append exactly once, at the version and
with the entry ids the client was told, each append whole in one event, the
versions 1..N without a gap; the durable log must list exactly the streamed
entries in order. Appends left unanswered may have landed, but at most once
and whole; refused ones not at all; nothing may be stored that no client sent.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import grpc
import psycopg
from psycopg import sql

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.adapters.event_store import EventStore
from tests.stress.workload import CHANNEL_OPTIONS, Outcome, entry_text

READ_TIMEOUT_SECONDS = 120
# The library names the events table after the application.
EVENTS_TABLE = f"{EventStore.name.lower()}_events"


@dataclass(frozen=True)
class StoredAppend:
    session_id: str
    version: int
    key: str
    entry_ids: tuple[str, ...]
    texts: tuple[str, ...]


@dataclass
class Verdict:
    sessions: int = 0
    events: int = 0
    entries: int = 0
    lost: int = 0
    duplicated: int = 0
    gaps: int = 0
    partial: int = 0
    # Acknowledged at one version or with entry ids, stored at or with others.
    misreported: int = 0
    # Stored, but sent by no client (or refused to it).
    unexpected: int = 0
    # The durable log's entries differ from the streamed events' entries.
    log_mismatches: int = 0
    # The events table's rows of a session differ from what ReadEvents streamed.
    table_mismatches: int = 0
    # Events other than the start and appends (a compaction, say): none expected.
    other_events: int = 0
    unresolved_stored: int = 0
    problems: list[str] = field(default_factory=list)

    def note(self, problem: str) -> None:
        if len(self.problems) < 20:  # the first few say enough
            self.problems.append(problem)

    @property
    def failures(self) -> dict[str, int]:
        counts = {
            "lost": self.lost,
            "duplicated": self.duplicated,
            "gaps": self.gaps,
            "partial": self.partial,
            "misreported": self.misreported,
            "unexpected": self.unexpected,
            "log_mismatches": self.log_mismatches,
            "table_mismatches": self.table_mismatches,
            "other_events": self.other_events,
        }
        return {name: count for name, count in counts.items() if count}


def verify(
    addresses: list[str], database_url: str, session_ids: list[str], outcomes: list[Outcome]
) -> Verdict:
    verdict = Verdict(sessions=len(session_ids))
    stored: dict[str, list[StoredAppend]] = defaultdict(list)
    # Each session's (events, head version) as ReadEvents streamed them.
    streamed: dict[str, tuple[int, int]] = {}
    channels = [grpc.insecure_channel(a, options=CHANNEL_OPTIONS) for a in addresses]
    try:
        stubs = [pb_grpc.SessionStoreStub(channel) for channel in channels]
        for n, session_id in enumerate(session_ids):
            stub = stubs[n % len(stubs)]
            events_before = verdict.events
            appends = _check_session(stub, session_id, verdict)
            head = max((append.version for append in appends), default=1)
            streamed[session_id] = (verdict.events - events_before, head)
            for append in appends:
                stored[append.key].append(append)
    finally:
        for channel in channels:
            channel.close()
    check_outcomes(outcomes, stored, verdict)
    _check_table(database_url, streamed, verdict)
    return verdict


def _check_table(database_url: str, streamed: dict[str, tuple[int, int]], verdict: Verdict) -> None:
    """The events table, read directly: the rows ReadEvents streamed, versions 1..N."""
    query = sql.SQL(
        "SELECT originator_id, count(*), min(originator_version), max(originator_version) "
        "FROM {} WHERE originator_id = ANY(%s) GROUP BY originator_id"
    ).format(sql.Identifier(EVENTS_TABLE))
    with psycopg.connect(database_url) as connection:
        rows = connection.execute(query, (list(streamed),)).fetchall()
    in_table = {str(row[0]): (int(row[1]), int(row[2]), int(row[3])) for row in rows}
    for session_id, (events, head) in streamed.items():
        count, lowest, highest = in_table.get(session_id, (0, 0, 0))
        if (count, lowest, highest) != (events, 1, head):
            verdict.table_mismatches += 1
            verdict.note(
                f"{session_id}: the events table has {count} rows, versions {lowest}..{highest}; "
                f"ReadEvents streamed {events} events up to v{head}"
            )


def _check_session(
    stub: pb_grpc.SessionStoreStub, session_id: str, verdict: Verdict
) -> list[StoredAppend]:
    request = pb.ReadEventsRequest(session_id=session_id)
    events = list(stub.ReadEvents(request, timeout=READ_TIMEOUT_SECONDS))
    logged_ids, log_version = _durable_log(stub, session_id)
    return check_stream(session_id, events, logged_ids, log_version, verdict)


def check_stream(
    session_id: str,
    events: list[pb.SessionEvent],
    logged_ids: list[str],
    log_version: int,
    verdict: Verdict,
) -> list[StoredAppend]:
    """Checks one session's events and durable log; answers the appends it holds."""
    verdict.events += len(events)
    versions = [event.version for event in events]
    head = max(versions, default=0)
    missing = len(set(range(1, head + 1)) - set(versions))
    if missing:
        verdict.gaps += missing
        verdict.note(f"{session_id}: {missing} version(s) missing below {head}")
    if len(versions) != len(set(versions)) or versions != sorted(versions):
        verdict.duplicated += len(versions) - len(set(versions))
        verdict.note(f"{session_id}: versions repeated or out of order")

    appends: list[StoredAppend] = []
    for event in events:
        kind = event.WhichOneof("event")
        if kind == "started":
            continue
        if kind != "entries_appended":
            verdict.other_events += 1
            verdict.note(f"{session_id}: unexpected {kind} event at version {event.version}")
            continue
        appended = event.entries_appended
        append = StoredAppend(
            session_id,
            event.version,
            appended.idempotency_key,
            tuple(entry.id for entry in appended.entries),
            tuple(_text(entry) for entry in appended.entries),
        )
        if not _whole(append):
            verdict.partial += 1
            verdict.note(f"{session_id} v{event.version}: not one whole turn: {append.texts}")
        appends.append(append)
    texts = Counter(text for append in appends for text in append.texts)
    repeated = sum(count - 1 for count in texts.values() if count > 1)
    if repeated:
        verdict.duplicated += repeated
        verdict.note(f"{session_id}: {repeated} entry text(s) stored more than once")

    streamed_ids = [entry_id for append in appends for entry_id in append.entry_ids]
    verdict.entries += len(streamed_ids)
    if logged_ids != streamed_ids or log_version != head:
        verdict.log_mismatches += 1
        verdict.note(
            f"{session_id}: durable log has {len(logged_ids)} entries at v{log_version}, "
            f"the events {len(streamed_ids)} up to v{head}"
        )
    return appends


def _durable_log(stub: pb_grpc.SessionStoreStub, session_id: str) -> tuple[list[str], int]:
    ids: list[str] = []
    token = ""
    while True:
        request = pb.GetViewRequest(session_id=session_id, page_token=token)
        page = stub.GetDurableLog(request, timeout=READ_TIMEOUT_SECONDS)
        ids.extend(entry.id for entry in page.entries)
        token = page.next_page_token
        if not token:
            return ids, page.version


def _text(entry: pb.Entry) -> str:
    return "".join(block.text.text for block in entry.content if block.HasField("text"))


def _whole(append: StoredAppend) -> bool:
    """All entries of the one append the event's key names, in order, and nothing else."""
    size = len(append.texts)
    return append.texts == tuple(entry_text(append.key, k, size) for k in range(size))


def check_outcomes(
    outcomes: list[Outcome], stored: dict[str, list[StoredAppend]], verdict: Verdict
) -> None:
    sent: set[str] = set()
    for outcome in outcomes:
        sent.add(outcome.key)
        found = stored.get(outcome.key, [])
        if len(found) > 1:
            verdict.duplicated += len(found) - 1
            verdict.note(f"{outcome.key}: stored {len(found)} times")
        if outcome.state == "acknowledged":
            if not found:
                verdict.lost += 1
                verdict.note(f"{outcome.key}: acknowledged at v{outcome.version}, not stored")
                continue
            first = found[0]
            if (
                first.session_id != outcome.session_id
                or first.version != outcome.version
                or first.entry_ids != outcome.entry_ids
                or len(first.texts) != outcome.size
            ):
                verdict.misreported += 1
                verdict.note(
                    f"{outcome.key}: acknowledged as {outcome.session_id} v{outcome.version} "
                    f"{outcome.entry_ids}, stored as {first.session_id} v{first.version} "
                    f"{first.entry_ids}"
                )
        elif outcome.state == "unresolved":
            verdict.unresolved_stored += bool(found)
        elif found:  # refused, yet stored
            verdict.unexpected += 1
            verdict.note(f"{outcome.key}: refused ({outcome.refusal}), yet stored")
    for key, appends in stored.items():
        if key not in sent:
            verdict.unexpected += len(appends)
            verdict.note(f"{key or '(no key)'}: stored, sent by no client")
