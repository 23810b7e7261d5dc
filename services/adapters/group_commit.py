"""Group commit: sessions saved at the same moment share one insert.

When several clients append at once, the first writer becomes the leader and
saves whatever has queued up by then in one statement (one round trip, one
WAL flush); the others wait for it. A lone writer saves at once. If the
shared insert hits a version conflict, each session is saved on its own so
that only the writer who lost the race hears about it.

The leader's insert may hang as long as the database does (a frozen server
holds a statement until the TCP timeouts end it). A writer still queued
behind it therefore leaves, its session unsaved, once its call's deadline
passes, its call is cut, or the database is known to be unreachable; one
whose session an insert already took waits for that insert, which decides
its fate. A wait ended by what is not an Exception (an interrupt, a
cancellation) leaves the same way: one woken to lead the next batch hands
that on, whichever way it leaves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from eventsourcing.persistence import IntegrityError

from domain.errors import DeadlineExceeded, Unavailable
from domain.session import Session
from services import deadline

# How often a writer queued behind an insert looks whether it should leave.
FOLLOW_WAIT_SLICE = 0.1


@dataclass(eq=False)
class _Ticket:
    session: Session
    wake: threading.Event = field(default_factory=threading.Event)
    done: bool = False
    # The notification id of the session's last event, once saved.
    position: int = 0
    error: BaseException | None = None


# Saves sessions in one insert; answers each session's position (or nothing).
SaveTogether = Callable[[Sequence[Session]], Mapping[str, int] | None]
# Why requests are refused at once while the database is known to be unreachable;
# None while it answers.
KnownOutage = Callable[[], BaseException | None]


class GroupCommit:
    def __init__(
        self, save_together: SaveTogether, known_outage: KnownOutage | None = None
    ) -> None:
        self._save_together = save_together
        self._known_outage = known_outage
        self._lock = threading.Lock()
        # Tickets no batch has taken yet; the first is woken to lead the next batch
        # once the one being saved is done.
        self._queue: list[_Ticket] = []
        # Whether a writer leads: saving a batch, or woken to take the next one.
        self._leading = False

    def save(self, session: Session) -> int:
        """Saves the session's pending events; answers their position.

        A writer that finds another leading waits to be saved with the next batch,
        or to lead it. Until a batch takes its session it leaves (nothing saved)
        when its call's deadline passes (DeadlineExceeded), its call is cut
        (Unavailable) or the database is known to be unreachable (the refusal a
        new request gets)."""
        ticket = _Ticket(session)
        with self._lock:
            self._queue.append(ticket)
            follow = self._leading
            self._leading = True
        if follow:
            self._follow(ticket)
        if not ticket.done:  # this writer leads the next batch
            with self._lock:
                batch, self._queue = self._queue, []
            try:
                self._save(batch, ticket)
            finally:
                # Whatever the insert raised: no writer may stay queued with nobody leading.
                with self._lock:
                    self._hand_on()
        if ticket.error is not None:
            raise ticket.error
        return ticket.position

    def _follow(self, ticket: _Ticket) -> None:
        """Waits, in slices, until the ticket's batch is saved or it is woken to lead;
        leaves, raising why, if its writer stops waiting while no batch has it."""
        try:
            self._wait_in_queue(ticket)
        except BaseException:
            # Whatever ended the wait, what is not an Exception too (an interrupt, a
            # cancellation, the process exiting): a ticket no batch has taken leaves,
            # and one woken to lead hands the lead on, as the leader's path does.
            self._leave(ticket)
            raise

    def _wait_in_queue(self, ticket: _Ticket) -> None:
        while not ticket.wake.wait(deadline.bounded(FOLLOW_WAIT_SLICE)):
            reason = self._why_stop_waiting()
            if reason is None:
                continue
            if self._leave(ticket):
                raise reason
            # A batch took it: that insert, bounded by the database's timeouts,
            # decides whether it was saved, and its writer must hear which.
            ticket.wake.wait()
            return

    def _why_stop_waiting(self) -> BaseException | None:
        outage = self._known_outage() if self._known_outage is not None else None
        if outage is not None:
            return outage
        try:
            deadline.check("waiting for other writes to be saved", outcome="nothing was written")
        except (DeadlineExceeded, Unavailable) as ended:
            return ended
        return None

    def _leave(self, ticket: _Ticket) -> bool:
        """Takes the ticket out of the queue if no batch has taken it; answers whether
        it did. One woken to lead the next batch hands that on."""
        with self._lock:
            if ticket not in self._queue:
                return False
            self._queue.remove(ticket)
            # Only the leader's hand-on wakes a ticket still queued.
            if ticket.wake.is_set():
                self._hand_on()
            return True

    def _hand_on(self) -> None:
        """Wakes the first queued writer to lead the next batch, or ends the leading
        if none waits. Called under the lock by the writer leading, or by one woken
        to lead that leaves instead."""
        if self._queue:
            self._queue[0].wake.set()
        else:
            self._leading = False

    def _save(self, batch: list[_Ticket], leader: _Ticket) -> None:
        """Saves the batch and wakes its writers, each with its position or error. What
        is not an Exception (an interrupt, a cancellation, the process exiting) ends
        the leader's call, and the others hear their write may not be saved."""
        try:
            self._insert(batch)
        except BaseException as interrupted:  # _insert lets no Exception through
            failure = Unavailable(
                f"the insert saving this write with others was interrupted "
                f"({type(interrupted).__name__}); it may not be saved: retry"
            )
            failure.__cause__ = interrupted
            for ticket in batch:
                ticket.error = failure
            raise
        finally:
            for ticket in batch:
                ticket.done = True
                if ticket is not leader:
                    ticket.wake.set()

    def _insert(self, batch: list[_Ticket]) -> None:
        try:
            positions = self._save_together([t.session for t in batch]) or {}
            for ticket in batch:
                ticket.position = positions.get(ticket.session.id, 0)
        except IntegrityError as conflict:
            if len(batch) == 1:
                batch[0].error = conflict
            else:
                for ticket in batch:
                    try:
                        positions = self._save_together([ticket.session]) or {}
                        ticket.position = positions.get(ticket.session.id, 0)
                    except Exception as error:
                        ticket.error = error
        except Exception as error:
            for ticket in batch:
                ticket.error = error
