"""Servers and workers starting at once on an empty PostgreSQL database all start: the
store's schema, tables, indexes and functions are made by one, and found by the others.

PostgreSQL lets concurrent CREATE ... IF NOT EXISTS fail on its catalog's unique keys,
so without the setup lock some of the starts below die with a duplicate key."""

from __future__ import annotations

import threading
import uuid

import psycopg
from psycopg import sql

from services.adapters.event_store import EventStore, build_event_store
from services.config import Config

STARTS = 6
ROUNDS = 3


def _start_at_once(config: Config) -> tuple[list[EventStore], list[Exception]]:
    ready = threading.Barrier(STARTS)
    started: list[EventStore] = []
    failed: list[Exception] = []

    def start() -> None:
        ready.wait()
        try:
            started.append(build_event_store(config))
        except Exception as error:
            failed.append(error)

    threads = [threading.Thread(target=start) for _ in range(STARTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return started, failed


def test_stores_started_at_once_on_an_empty_database_all_start(postgres_url: str) -> None:
    separator = "&" if "?" in postgres_url else "?"
    for _ in range(ROUNDS):
        schema = f"test_{uuid.uuid4().hex[:12]}"
        started, failed = _start_at_once(
            Config(database_url=f"{postgres_url}{separator}schema={schema}")
        )
        try:
            assert failed == []
            assert len(started) == STARTS
            for store in started:
                assert store.recorder.max_notification_id() is None  # empty, and readable
        finally:
            for store in started:
                store.close()
            with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
