"""Group commit: sessions saved at the same moment share one insert.

When several clients append at once, the first writer becomes the leader and
saves whatever has queued up by then in one statement (one round trip, one
WAL flush); the others wait for it. A lone writer saves at once. If the
shared insert hits a version conflict, each session is saved on its own so
that only the writer who lost the race hears about it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from eventsourcing.persistence import IntegrityError

from domain.session import Session


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


class GroupCommit:
    def __init__(self, save_together: SaveTogether) -> None:
        self._save_together = save_together
        self._lock = threading.Lock()
        self._queue: list[_Ticket] = []
        self._leading = False

    def save(self, session: Session) -> int:
        """Saves the session's pending events; answers their position."""
        ticket = _Ticket(session)
        with self._lock:
            self._queue.append(ticket)
            follow = self._leading
            self._leading = True
        if follow:
            ticket.wake.wait()
        if not ticket.done:  # this writer leads the next batch
            with self._lock:
                batch, self._queue = self._queue, []
            self._save(batch, ticket)
            with self._lock:
                if self._queue:
                    self._queue[0].wake.set()  # the next leader
                else:
                    self._leading = False
        if ticket.error is not None:
            raise ticket.error
        return ticket.position

    def _save(self, batch: list[_Ticket], leader: _Ticket) -> None:
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
        for ticket in batch:
            ticket.done = True
            if ticket is not leader:
                ticket.wake.set()
