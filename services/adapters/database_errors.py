"""What a database error means, so that each is answered for what it is.

Every database call of the store (the event store's recorders, the read models'
queries and writes) fails for one of these reasons, told apart by the driver's
own code (SQLite's error name, PostgreSQL's SQLSTATE; for a login refused, which
libpq gives none, the server's words), never by the wrapper class a library put
around it:

- an **outage**: the server down, restarting or refusing connections, a
  connection lost, a lock held past its timeout, a disk that fails or is full.
  It passes by itself: retry shortly.
- a **store not migrated** to this release: a table, column, function or schema
  it uses is missing. No retry on this store helps until an operator runs
  `sessionstore migrate` (or restores what was dropped).
- a **permission denied**: the PostgreSQL role lacks a grant, or the SQLite file
  may not be written. No retry helps until an operator grants it.
- a **login refused**: the PostgreSQL role in the database URL does not exist or
  may not log in, or its password is wrong. No retry helps until an operator
  fixes the URL or the role.
- a **read-only** database: a PostgreSQL standby, or transactions read-only
  by default for the role or the database. Reads go on; no write succeeds
  until an operator points the server at the primary.
- a **corrupt** database: a SQLite file that is not a database (its header
  overwritten) or has a malformed page, PostgreSQL data or an index reported
  damaged. No retry helps until an operator restores it from a backup.
- anything else: a statement the database rejects (a syntax error, a type, a
  constraint), which is the caller's to handle or a fault of ours. It is left as
  it is, so a fault is answered INTERNAL and logged with its traceback.

All but the last are states of the database, answered UNAVAILABLE, each with a
reason of its own and a message that says what to fix
(services.adapters.database_refusals): the call may succeed on another server
(one whose database is up, migrated, or reached as a role with the grant), and
the client that retries succeeds here too once the state is fixed, with no
restart. The read models' projection backs off on them
instead of quarantining events it could apply once the state is fixed.
"""

from __future__ import annotations

import enum
import re
import sqlite3

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError
from psycopg_pool import PoolTimeout
from sqlalchemy import exc as sa_exc

from domain.errors import (
    DatabaseCorrupt,
    DatabaseLoginRefused,
    DatabasePermissionDenied,
    DatabaseReadOnly,
    StoreNotMigrated,
    Unavailable,
)


class Kind(enum.Enum):
    OUTAGE = "outage"
    NOT_MIGRATED = "not migrated"
    PERMISSION_DENIED = "permission denied"
    LOGIN_REFUSED = "login refused"
    READ_ONLY = "read only"
    CORRUPT = "corrupt"


# SQLSTATEs of something the release uses that the database does not have:
# undefined table, column, function, object (a type, an index), schema.
_NOT_MIGRATED_STATES = frozenset({"42P01", "42703", "42883", "42704", "3F000"})
_INSUFFICIENT_PRIVILEGE = "42501"
# Invalid authorization specification (a role unknown or without LOGIN, no
# pg_hba.conf entry), invalid password.
_LOGIN_REFUSED_STATES = frozenset({"28000", "28P01"})
# A connection refused at login carries no SQLSTATE (libpq gives none before a
# session exists), only the server's words: those of the states above, in the
# server's default English (a server with other lc_messages reads as an outage).
_LOGIN_REFUSED = re.compile(
    r'FATAL:  (role "[^"]*" (does not exist|is not permitted to log in)'
    r"|\w+ authentication failed for user|no pg_hba\.conf entry for"
    r"|pg_hba\.conf rejects connection)"
    r"|fe_sendauth: no password supplied"
)
# Written to in a read-only transaction, or (on a standby) during recovery.
_READ_ONLY_SQL_TRANSACTION = "25006"
_DATA_CORRUPTED_STATES = frozenset({"XX001", "XX002"})  # data corrupted, index corrupted
# SQLite says the same with SQLITE_ERROR, the code of its syntax errors too.
_SQLITE_MISSING = re.compile(r"^no such (table|column)|has no column named")
_SQLITE_NOT_PERMITTED = ("SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH")
# A malformed page (an extended code too: SQLITE_CORRUPT_INDEX, ...), a header that
# is not SQLite's. Raised as DatabaseError, not OperationalError.
_SQLITE_CORRUPT = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
# What a database that cannot be reached (or a pool with no connection to give)
# raises where no driver error says more: the pools' timeouts, lost connections,
# and the libraries' wrappers of both.
_OUTAGES: tuple[type[BaseException], ...] = (
    PoolTimeout,
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,
    OperationalError,
    InterfaceError,
    ConnectionError,
    TimeoutError,
)

# The refusals already made for each (a subclass before the class it refines).
_REFUSALS: tuple[tuple[type[Unavailable], Kind], ...] = (
    (StoreNotMigrated, Kind.NOT_MIGRATED),
    (DatabasePermissionDenied, Kind.PERMISSION_DENIED),
    (DatabaseLoginRefused, Kind.LOGIN_REFUSED),
    (DatabaseReadOnly, Kind.READ_ONLY),
    (DatabaseCorrupt, Kind.CORRUPT),
    (Unavailable, Kind.OUTAGE),
)


def kind_of(error: BaseException) -> Kind | None:
    """Which state of the database ``error`` comes from; None when from none (a
    statement the database rejects, or not a database error at all)."""
    made = next((kind for refusal, kind in _REFUSALS if isinstance(error, refusal)), None)
    if made is not None:
        return made
    chain = _chain(error)
    driver = _driver_error(chain)
    if isinstance(driver, sqlite3.Error):
        return _sqlite_kind(driver)
    if isinstance(driver, psycopg.Error):
        return _postgres_kind(driver)
    if any(isinstance(link, _OUTAGES) for link in chain):
        return Kind.OUTAGE
    return None


def first_line(error: BaseException) -> str:
    """The driver's own words (its first line), else the error's."""
    driver = _driver_error(_chain(error)) or error
    lines = str(driver).strip().splitlines()
    return lines[0] if lines else type(driver).__name__


def _driver_error(chain: list[BaseException]) -> BaseException | None:
    """The driver's error the others wrap: the last of the chain. (A pool's timeout
    is one of psycopg's errors too, raised from the one that says why no connection
    could be had, when that is known.)"""
    drivers = [link for link in chain if isinstance(link, sqlite3.Error | psycopg.Error)]
    return drivers[-1] if drivers else None


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and what it wraps: SQLAlchemy's driver error (``orig``), then causes."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return chain


def _sqlite_kind(error: sqlite3.Error) -> Kind | None:
    name = getattr(error, "sqlite_errorname", None) or ""
    if name.startswith(_SQLITE_CORRUPT):
        return Kind.CORRUPT
    if not isinstance(error, sqlite3.OperationalError):
        return None  # a constraint, a value it cannot bind
    if name == "SQLITE_ERROR":
        return Kind.NOT_MIGRATED if _SQLITE_MISSING.search(str(error)) else None
    if name.startswith(_SQLITE_NOT_PERMITTED):
        return Kind.PERMISSION_DENIED
    # Busy or locked past the timeout, an I/O error, a file that cannot be opened,
    # a full disk, an interrupted statement.
    return Kind.OUTAGE


def _postgres_kind(error: psycopg.Error) -> Kind | None:
    state = error.sqlstate or ""
    if state in _NOT_MIGRATED_STATES:
        return Kind.NOT_MIGRATED
    if state == _INSUFFICIENT_PRIVILEGE:
        return Kind.PERMISSION_DENIED
    if state in _LOGIN_REFUSED_STATES or (not state and _LOGIN_REFUSED.search(str(error))):
        return Kind.LOGIN_REFUSED
    if state == _READ_ONLY_SQL_TRANSACTION:
        return Kind.READ_ONLY
    if state in _DATA_CORRUPTED_STATES:
        return Kind.CORRUPT
    # Connections lost or refused (08, or no SQLSTATE), a server shutting down
    # (57), out of resources (53), failing I/O (58), a transaction to run again
    # (40), a lock not available (55P03): psycopg's OperationalError, all of them.
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        return Kind.OUTAGE
    return None
