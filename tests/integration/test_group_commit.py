"""Group commit on a real event store, SQLite and PostgreSQL: batches form, a conflict
stays with its writer, a writer queued behind an insert that hangs leaves when its
call ends (unless an insert already took its session) without stranding those behind
it, and an insert interrupted, or a wait, strands none either."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator, Sequence

import pytest
from eventsourcing.persistence import IntegrityError

from domain.content import Entry, Role, TextBlock
from domain.errors import DeadlineExceeded, Unavailable
from domain.ids import HistoryIds
from domain.session import Session
from domain.settings import SessionSettings
from projections.session_history import SessionHistory
from services import deadline
from services.adapters.event_store import EventStore
from services.adapters.group_commit import GroupCommit
from services.config import persistence_env
from services.deadline import Cut


def new_session(session_id: str) -> Session:
    return Session.start(session_id, SessionSettings(model="gpt-4o"), (128_000, "session"))


def add_turn(session: Session, text: str) -> None:
    session.append(
        [Entry("", None, None, Role.USER, (TextBlock(text),))],
        HistoryIds(SessionHistory(session.id)),
    )


@pytest.fixture
def store(database_url: str) -> Iterator[EventStore]:
    events = EventStore(persistence_env(database_url))
    yield events
    events.close()


def test_concurrent_writers_share_inserts_and_all_land(store: EventStore) -> None:
    batches: list[int] = []

    def save_together(sessions: Sequence[Session]) -> None:
        batches.append(len(sessions))
        if len(batches) == 1:
            time.sleep(0.2)  # a slow first insert, so the other writers queue behind it
        store.save_sessions(sessions)

    group = GroupCommit(save_together)
    sessions = [new_session(f"s{i}") for i in range(8)]
    writers = [threading.Thread(target=group.save, args=(s,)) for s in sessions]
    for writer in writers:
        writer.start()
        time.sleep(0.01)
    for writer in writers:
        writer.join()
    assert sum(batches) == 8
    assert max(batches) > 1
    for session in sessions:
        assert store.repository.get(session.id).version == 1
        assert not session.pending_events


def test_a_conflict_in_a_shared_insert_fails_only_its_writer(store: EventStore) -> None:
    contested = new_session("contested")
    store.save_sessions([contested])
    stale = copy.deepcopy(contested)
    add_turn(contested, "first")
    store.save_sessions([contested])  # another writer took version 2
    add_turn(stale, "second")  # this copy wants version 2 too
    bystander = new_session("bystander")

    gate = threading.Event()
    errors: dict[str, BaseException] = {}
    batches: list[list[str]] = []

    def save_together(sessions: Sequence[Session]) -> None:
        gate.wait(5)  # hold the first insert until both writers have queued
        batches.append([s.id for s in sessions])
        store.save_sessions(sessions)

    group = GroupCommit(save_together)

    def write(session: Session) -> None:
        try:
            group.save(session)
        except IntegrityError as error:
            errors[session.id] = error

    first = threading.Thread(target=write, args=(new_session("opener"),))
    first.start()
    time.sleep(0.05)
    others = [threading.Thread(target=write, args=(s,)) for s in (stale, bystander)]
    for writer in others:
        writer.start()
    time.sleep(0.05)
    gate.set()
    for writer in [first, *others]:
        writer.join()

    # The two queued writers shared an insert, which failed; then each went alone.
    assert batches[0] == ["opener"]
    assert sorted(batches[1]) == ["bystander", "contested"]
    assert sorted(map(tuple, batches[2:])) == [("bystander",), ("contested",)]
    assert set(errors) == {"contested"}
    assert store.repository.get("bystander").version == 1
    stored = store.session_events("contested")
    assert [e.originator_version for e in stored] == [1, 2]
    assert stored[1].entries[0].content == (TextBlock("first"),)  # type: ignore[attr-defined]


class HeldInserts:
    """The store's insert, the first ``held`` of them held until the test lets each go
    on: to the writers, a database that stopped answering mid-statement."""

    def __init__(self, store: EventStore, held: int = 1) -> None:
        self.store = store
        self.batches: list[list[str]] = []
        self.positions: dict[str, int] = {}
        self.begun = [threading.Event() for _ in range(held)]
        self.go_on = [threading.Event() for _ in range(held)]

    def __call__(self, sessions: Sequence[Session]) -> dict[str, int]:
        number = len(self.batches)
        self.batches.append([s.id for s in sessions])
        if number < len(self.begun):
            self.begun[number].set()
            self.go_on[number].wait(10)  # a bound only so that a failed test ends
        positions = self.store.save_sessions(sessions)
        self.positions.update(positions)
        return positions


class Probe:
    """The database's probe as the group commit asks it (known_outage): it answers the
    outage the test names for a writer, and tells the test who asked; a writer's
    question can be held, to decide when its answer comes, and ended instead by what
    the test names (an interrupt that reaches the writer while it waits)."""

    def __init__(self, *writers: str) -> None:
        self.asked = {name: threading.Event() for name in writers}
        self.outages: dict[str, BaseException] = {}
        self.holds: dict[str, threading.Event] = {}
        self.interrupts: dict[str, BaseException] = {}

    def __call__(self) -> BaseException | None:
        name = threading.current_thread().name
        if name in self.asked:
            self.asked[name].set()  # only a writer waiting for another's insert asks
        if name in self.holds:
            self.holds[name].wait(10)
        if name in self.interrupts:
            raise self.interrupts[name]
        return self.outages.get(name)


class Writer(threading.Thread):
    """A call saving one session (named after the writer) through the group commit."""

    def __init__(
        self, group: GroupCommit, name: str, *, ends_at: float | None = None, cut: Cut | None = None
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.group = group
        self.session = new_session(name)
        self.ends_at = ends_at
        self.cut = cut
        self.position: int | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        with deadline.within(self.ends_at, self.cut):
            try:
                self.position = self.group.save(self.session)
            except BaseException as error:  # an insert interrupted too, to assert on
                self.error = error

    def finish(self) -> None:
        self.join(5)  # a bound only so that a wait that never ends fails, not hangs
        assert not self.is_alive(), f"{self.name} is still waiting"


def _leading(group: GroupCommit, inserts: HeldInserts) -> Writer:
    """A writer whose insert has begun and is held: those after it queue behind it."""
    leader = Writer(group, "leader")
    leader.start()
    assert inserts.begun[0].wait(5)
    return leader


def _saved_after(group: GroupCommit, name: str) -> int:
    """A writer coming after the others: it saves (none left leading a batch that
    never comes), within a deadline so that a test that fails ends."""
    with deadline.within(time.monotonic() + 5):
        return group.save(new_session(name))


def test_a_writer_still_queued_at_its_deadline_leaves_unsaved(store: EventStore) -> None:
    inserts = HeldInserts(store)
    group = GroupCommit(inserts)
    leader = _leading(group, inserts)
    late = Writer(group, "late", ends_at=time.monotonic() + 0.3)
    late.start()
    late.finish()
    assert isinstance(late.error, DeadlineExceeded)
    assert str(late.error) == (
        "the call's deadline passed while waiting for other writes to be saved; nothing was written"
    )
    inserts.go_on[0].set()
    leader.finish()
    assert leader.error is None
    assert _saved_after(group, "next") == inserts.positions["next"]
    assert inserts.batches == [["leader"], ["next"]]
    assert store.session_events("late") == []
    assert late.session.pending_events  # kept, as after any failed save


def test_a_writer_still_queued_when_its_call_is_cut_leaves_unsaved(store: EventStore) -> None:
    inserts = HeldInserts(store)
    probe = Probe("cancelled")
    group = GroupCommit(inserts, probe)
    leader = _leading(group, inserts)
    cut = Cut()
    cancelled = Writer(group, "cancelled", cut=cut)
    cancelled.start()
    assert probe.asked["cancelled"].wait(5)
    cut("the call was cancelled")
    cancelled.finish()
    assert isinstance(cancelled.error, Unavailable)
    assert str(cancelled.error) == (
        "the call was cancelled while waiting for other writes to be saved; "
        "nothing was written: retry"
    )
    inserts.go_on[0].set()
    leader.finish()
    assert _saved_after(group, "next") == inserts.positions["next"]
    assert inserts.batches == [["leader"], ["next"]]
    assert store.session_events("cancelled") == []


def test_a_writer_still_queued_leaves_once_the_database_is_known_down(
    store: EventStore,
) -> None:
    inserts = HeldInserts(store)
    probe = Probe("queued")
    group = GroupCommit(inserts, probe)
    leader = _leading(group, inserts)
    queued = Writer(group, "queued")  # no deadline: it would wait as long as the insert
    queued.start()
    assert probe.asked["queued"].wait(5)
    outage = Unavailable("the database does not answer (no reply to a probe within 3 s)")
    probe.outages["queued"] = outage
    queued.finish()
    assert queued.error is outage
    inserts.go_on[0].set()
    leader.finish()
    assert inserts.batches == [["leader"]]
    assert store.session_events("queued") == []


def test_a_writer_an_insert_took_waits_for_it_whatever_befalls_its_call(
    store: EventStore,
) -> None:
    """Once a batch has taken its session, a writer that would leave stays: the insert
    under way decides whether the session was saved, and the writer answers that."""
    inserts = HeldInserts(store, held=2)
    probe = Probe("next-leader", "taken")
    group = GroupCommit(inserts, probe)
    leader = _leading(group, inserts)
    # The first queued leads the next batch; the one behind it is taken into it.
    next_leader = Writer(group, "next-leader")
    next_leader.start()
    assert probe.asked["next-leader"].wait(5)
    probe.holds["taken"] = taken_aboard = threading.Event()
    cut = Cut()
    taken = Writer(group, "taken", cut=cut)
    taken.start()
    assert probe.asked["taken"].wait(5)
    inserts.go_on[0].set()
    assert inserts.begun[1].wait(5)
    assert inserts.batches[1] == ["next-leader", "taken"]
    # Its call is cut and the database found down, while the insert holding its session hangs.
    cut("the call was cancelled")
    probe.outages["taken"] = Unavailable("the database does not answer")
    taken_aboard.set()
    inserts.go_on[1].set()
    for writer in (leader, next_leader, taken):
        writer.finish()
    assert taken.error is None
    assert taken.position == inserts.positions["taken"]
    assert [e.originator_version for e in store.session_events("taken")] == [1]
    assert _saved_after(group, "next") == inserts.positions["next"]


class Interrupted(BaseException):
    """Not an Exception, as an interrupt, a cancellation or a process's exit is."""


def test_an_insert_interrupted_fails_its_batch_and_hands_the_lead_on(
    store: EventStore,
) -> None:
    """The insert of a batch of two raises what is not an Exception: its leader's call
    ends with it, the other writer in the batch hears its write may not be saved
    (rather than waiting for good), and the next writer to come leads and saves."""
    inserts = HeldInserts(store)
    interrupted = Interrupted("the insert was interrupted")

    def save_together(sessions: Sequence[Session]) -> dict[str, int]:
        if len(inserts.batches) == 1:  # the batch after the held first one
            inserts.batches.append([s.id for s in sessions])
            raise interrupted
        return inserts(sessions)

    probe = Probe("next-leader", "follower")
    group = GroupCommit(save_together, probe)
    leader = _leading(group, inserts)
    next_leader = Writer(group, "next-leader")
    next_leader.start()
    assert probe.asked["next-leader"].wait(5)  # queued first: it leads the next batch
    follower = Writer(group, "follower")
    follower.start()
    assert probe.asked["follower"].wait(5)  # queued behind it: taken into that batch
    inserts.go_on[0].set()
    for writer in (leader, next_leader, follower):
        writer.finish()
    assert leader.error is None
    assert next_leader.error is interrupted
    assert type(follower.error) is Unavailable
    assert str(follower.error) == (
        "the insert saving this write with others was interrupted (Interrupted); "
        "it may not be saved: retry"
    )
    assert follower.error.__cause__ is interrupted
    assert _saved_after(group, "next") == inserts.positions["next"]
    assert inserts.batches == [["leader"], ["next-leader", "follower"], ["next"]]
    assert store.session_events("follower") == []


@pytest.mark.parametrize("behind", [0, 1])
@pytest.mark.parametrize("ending", ["leaves", "interrupted"])
def test_a_writer_woken_to_lead_that_leaves_hands_the_lead_on(
    store: EventStore, behind: int, ending: str
) -> None:
    """The writer first in the queue, woken to lead the next batch, is at that moment
    leaving (the database was found down) or interrupted (what is not an Exception
    ends its wait): the writer behind it leads instead, or, none being queued, the
    next to come."""
    inserts = HeldInserts(store)
    probe = Probe("woken", "behind")
    group = GroupCommit(inserts, probe)
    leader = _leading(group, inserts)
    probe.holds["woken"] = answered = threading.Event()
    woken = Writer(group, "woken")
    woken.start()
    assert probe.asked["woken"].wait(5)  # queued first, its question held
    others = [Writer(group, "behind")] if behind else []
    for writer in others:
        writer.start()
        assert probe.asked["behind"].wait(5)
    inserts.go_on[0].set()
    leader.finish()  # it woke the first queued to lead before it returned
    ended: BaseException
    if ending == "leaves":
        ended = probe.outages["woken"] = Unavailable("the database does not answer")
    else:
        ended = probe.interrupts["woken"] = Interrupted("the wait was interrupted")
    answered.set()
    woken.finish()
    assert woken.error is ended
    for writer in others:
        writer.finish()
        assert writer.error is None and writer.position == inserts.positions["behind"]
    assert _saved_after(group, "next") == inserts.positions["next"]
    assert inserts.batches == [["leader"], *([["behind"]] if behind else []), ["next"]]
    assert store.session_events("woken") == []


def test_a_queued_writer_whose_wait_is_interrupted_leaves_unsaved(store: EventStore) -> None:
    """A writer still queued behind an insert is interrupted: it leaves the queue, so no
    later batch saves the session its call failed for, nor waits for it to lead."""
    inserts = HeldInserts(store)
    probe = Probe("queued")
    group = GroupCommit(inserts, probe)
    leader = _leading(group, inserts)
    queued = Writer(group, "queued")
    interrupted = Interrupted("the wait was interrupted")
    probe.interrupts["queued"] = interrupted
    queued.start()
    queued.finish()
    assert queued.error is interrupted
    inserts.go_on[0].set()
    leader.finish()
    assert _saved_after(group, "next") == inserts.positions["next"]
    assert inserts.batches == [["leader"], ["next"]]
    assert store.session_events("queued") == []
