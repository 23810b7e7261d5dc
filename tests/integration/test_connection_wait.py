"""A call waiting for one of the event store's PostgreSQL connections, all of them in
use: the wait ends when the call is cut (its client gone, the server stopping), not
after the pool's timeout."""

from __future__ import annotations

import threading
import time

from domain.errors import Unavailable
from services import deadline
from services.adapters.event_store import EventStore
from services.config import persistence_env
from services.deadline import Cut

POOL_TIMEOUT_SECONDS = 30
# Far below the pool's timeout, with room for a loaded machine: a wait that ended
# only with the timeout would not have ended by then.
JOIN_SECONDS = 5


def test_a_wait_for_a_busy_pools_connection_ends_when_the_call_is_cut(
    postgres_schema_url: str,
) -> None:
    env = {
        **persistence_env(postgres_schema_url),
        "POSTGRES_POOL_SIZE": "1",
        "POSTGRES_MAX_OVERFLOW": "0",
        "POSTGRES_CONNECT_TIMEOUT": str(POOL_TIMEOUT_SECONDS),  # the wait's timeout too
    }
    events = EventStore(env)
    pool = events.recorder.datastore.pool  # type: ignore[attr-defined]
    cut = Cut()
    outcome: list[BaseException | int | None] = []

    def waiting_read() -> None:
        with deadline.within(None, cut):  # no deadline: only the cut can end the wait
            try:
                outcome.append(events.recorder.max_notification_id())
            except BaseException as error:
                outcome.append(error)

    try:
        with events.recorder.datastore.get_connection():  # type: ignore[attr-defined]
            queued_before = pool.get_stats().get("requests_queued", 0)
            reader = threading.Thread(target=waiting_read)
            reader.start()
            # Cut once the read has waited out a slice and waits again, so that a
            # slice's own look at the cut ends it (not one before any wait).
            while pool.get_stats().get("requests_queued", 0) < queued_before + 2:
                assert reader.is_alive(), outcome
                time.sleep(0.01)
            cut("the client cancelled the call")
            reader.join(JOIN_SECONDS)
            assert not reader.is_alive(), "the wait outlived its call's cut"
        [error] = outcome
        assert type(error) is Unavailable
        assert str(error) == (
            "the client cancelled the call while waiting for a database connection; "
            "nothing more was done: retry"
        )
        assert events.recorder.max_notification_id() is None  # the pool serves again
    finally:
        events.close()
