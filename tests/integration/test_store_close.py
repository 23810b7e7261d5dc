"""Closing the store while a thread still reads from it (what a stopping server leaves:
a compaction finishing, a call cut short) lets that read finish first. The library's
pool would close the connection under it, and SQLite crashes the process when a
connection closes under a query."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from services.adapters.event_store import build_event_store
from services.config import Config

HELD_SECONDS = 0.3


def test_closing_the_store_waits_for_a_read_under_way(tmp_path: Path) -> None:
    store = build_event_store(Config(database_url=f"sqlite:///{tmp_path}/s.db"))
    datastore = store.recorder.datastore  # type: ignore[attr-defined]
    reading = threading.Event()
    answers: list[int] = []
    failures: list[BaseException] = []

    def read() -> None:
        try:
            with datastore.transaction(commit=False) as cursor:
                cursor.execute("SELECT 1")
                reading.set()
                time.sleep(HELD_SECONDS)
                cursor.execute("SELECT 2")
                answers.append(cursor.fetchone()[0])
        except BaseException as error:
            failures.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    assert reading.wait(10)
    began = time.monotonic()
    store.close()
    waited = time.monotonic() - began
    reader.join()
    assert not failures
    assert answers == [2]
    assert waited > HELD_SECONDS / 2  # the close waited for the read, not the other way
