"""Which process does the work one process of several does: which worker projects
(one leader per database, the others wait), and which worker or server applies
retention. Each is a lock of its own, taken and held the same way
(``lead_while``).

On PostgreSQL the leader holds a session-level advisory lock
(``pg_try_advisory_lock``) on a connection of its own. The lock lives as long
as that connection: a worker killed in any way, or cut off from the
database, loses it when PostgreSQL ends its session (at once for a process
that dies; within the TCP keepalive of services.adapters.postgres_timeouts for
a host that vanishes), and a waiting worker takes it at its next try. The
leader checks its connection every second and stops projecting when it is
gone, then waits like the others. A batch the database still holds then (a
server frozen mid-statement) ends once it lets it go; a worker that takes the
lead back before that goes on watching its lock, and projects once the batch
has ended, never beside it (services.readmodels.thread_sets).

The lock saves work, not correctness: each batch of the projection locks its
read models' tracking rows and commits with its position, so two projectors
for a moment (a leader that has not yet noticed its loss) still apply every
event once.

SQLite has no sessions to hold a lock across processes: run one worker (a
second would take turns with it on the database's write lock, never applying
an event twice, but doubling the work).

Servers that project in process (``inprocess``) all project. Retention has a
lock of its own (``RETENTION_LOCK``), so that it never keeps a worker from
projecting: of the workers and servers given a policy file, its holder applies
it.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import structlog

from services.adapters.read_model_db import ReadModelDatabase, connect_postgres
from services.readmodels.service import ReadModels

WORKER_LOCK = "sessionstore.read_models.worker"
RETENTION_LOCK = "sessionstore.retention"
# How often a waiting worker tries the lock, and the leader checks it still holds it.
TRY_SECONDS = 1.0

log = structlog.get_logger(__name__)


class Lease:
    """One lock of one PostgreSQL database (and schema), held by at most one process at
    a time; ``role`` names its connection."""

    def __init__(self, database: ReadModelDatabase, lock: str, role: str) -> None:
        self._database = database
        self._key = f"{database.schema}.{lock}"
        self._role = role
        self._conn: psycopg.Connection[Any] | None = None

    def try_take(self) -> bool:
        """Takes the lock if no one holds it; false when another does or the database
        cannot be reached."""
        try:
            if self._conn is None or self._conn.closed:
                # Named, so that an operator finds the leader in pg_stat_activity.
                self._conn = connect_postgres(
                    self._database,
                    application_name=f"{self._role} {socket.gethostname()} {os.getpid()}",
                )
            row = self._conn.execute(
                "SELECT pg_try_advisory_lock(hashtext(%s))", (self._key,)
            ).fetchone()
            return bool(row and row[0])
        except psycopg.Error:
            self.release()
            return False

    def held(self) -> bool:
        """Whether the lock is still ours: a session-level lock lasts as long as its
        session, so the connection answering is the proof."""
        try:
            return self._conn is not None and self._conn.execute("SELECT 1").fetchone() is not None
        except psycopg.Error:
            self.release()
            return False

    def release(self) -> None:
        """Closes the connection, which frees the lock if it was held."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def project_while_leading(models: ReadModels, stopping: threading.Event) -> None:
    """Runs the read models' projection while this process leads, until ``stopping``
    (then the caller closes the models)."""
    names = sorted(models.store.models)

    def took() -> None:
        if models.database.postgres:
            log.info("leading: projecting", read_models=names)
        else:
            log.info("projecting; on SQLite run one worker only", read_models=names)
        models.start()

    def lost() -> None:
        if models.runner is not None:
            models.runner.stop()

    lead_while(models.database, WORKER_LOCK, stopping, took, lost, role="sessionstore-worker")


def lead_while(
    database: ReadModelDatabase,
    lock: str,
    stopping: threading.Event,
    took: Callable[[], None],
    lost: Callable[[], None],
    *,
    role: str = "sessionstore",
) -> None:
    """Calls ``took`` each time this process takes ``lock`` and ``lost`` each time the
    database ends its hold, until ``stopping`` (whoever set it cleans up). SQLite
    has no lock across processes: there it takes the lead at once."""
    if not database.postgres:
        took()
        stopping.wait()
        return
    lease = Lease(database, lock, role)
    try:
        while not stopping.is_set():
            if not lease.try_take():
                log.info(
                    "waiting for the lead (another process holds it, or the database is away)",
                    lock=lock,
                    every_seconds=TRY_SECONDS,
                )
                while not stopping.wait(TRY_SECONDS) and not lease.try_take():
                    pass
                if stopping.is_set():
                    return
            log.info("took the lead", lock=lock)
            took()
            while not stopping.wait(TRY_SECONDS) and lease.held():
                pass
            if stopping.is_set():
                return
            log.warning("lost the lead (the database ended its session); waiting again", lock=lock)
            lost()
    finally:
        lease.release()
