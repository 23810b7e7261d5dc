"""What a call is answered when a database error comes from a state of the database
(services.adapters.database_errors tells which): UNAVAILABLE, with a message that
says what ends it. An outage says what its caller calls it (the database
unreachable, a file that cannot be used now) and to retry shortly; a state only
an operator ends names what the operator must do."""

from __future__ import annotations

import copy

from domain.errors import (
    DatabaseCorrupt,
    DatabaseLoginRefused,
    DatabaseNeedsOperator,
    DatabasePermissionDenied,
    DatabaseReadOnly,
    DomainError,
    StoreNotMigrated,
    Unavailable,
)
from services.adapters.database_errors import Kind, first_line, kind_of

NOT_MIGRATED_MESSAGE = (
    "the database lacks a table, column or function this release uses ({reason}): the "
    "store is not migrated to this release, or a table was dropped from it: run "
    "`sessionstore migrate` (it makes a read model's dropped tables again, rebuilt from "
    "the events; a dropped event log table must be restored from a backup), then retry"
)
ROLE_DENIED_MESSAGE = (
    "the database role {role!r} lacks a privilege this server needs ({reason}): grant "
    "it to {role!r} (SELECT, INSERT, UPDATE and DELETE on the store's tables; USAGE on "
    "its schema; USAGE and SELECT on its sequences; EXECUTE on its functions), then retry"
)
FILE_DENIED_MESSAGE = (
    "the database file may not be written by this server ({reason}): give the server's "
    "user write access to the file and its folder, then retry"
)
LOGIN_REFUSED_MESSAGE = (
    "the database refused to let role {role!r} log in ({reason}): the credentials in "
    "the database URL were refused: fix the URL's user and password, or create the "
    "role (CREATE ROLE ... LOGIN, with the grants the server needs), then retry"
)
READ_ONLY_MESSAGE = (
    "the database takes no writes ({reason}): this server is connected to a read-only "
    "database (a standby, or one where default_transaction_read_only is on for role "
    "{role!r} or the database): point the database URL at the primary, then retry"
)
CORRUPT_FILE_MESSAGE = (
    "the database file is damaged ({reason}): stop the servers that use it and restore "
    "it from a backup (`PRAGMA integrity_check` in the sqlite3 shell says what is "
    "damaged; its `.recover` saves what it can), then retry"
)
CORRUPT_DATA_MESSAGE = (
    "the database reports damaged data ({reason}): restore it from a backup (or, for "
    "a damaged index, REINDEX it), then retry"
)


def database_refusal(
    error: BaseException, outage: str, role: str | None = None
) -> Unavailable | None:
    """What to answer for ``error``: an outage says ``outage`` (with ``{reason}``, the
    driver's first line, in it); a state only an operator ends says what the
    operator must do (operator_refusal). None for an error that is no state of the
    database, to be raised as it is (and for a refusal already made)."""
    if isinstance(error, DomainError):
        return None
    if kind_of(error) is Kind.OUTAGE:
        return Unavailable(outage.format(reason=first_line(error)))
    return operator_refusal(error, role)


def operator_refusal(error: BaseException, role: str | None = None) -> Unavailable | None:
    """The refusal for a state of the database that only an operator ends (tables
    missing, a grant lacking, a login refused, writes refused, a damaged file),
    saying what to do and naming ``role`` (a PostgreSQL role; None: a SQLite file);
    None for any other error."""
    if isinstance(error, DatabaseNeedsOperator):
        return copy.copy(error)  # made already; the copy leaves its traceback behind
    if isinstance(error, DomainError):
        return None
    kind = kind_of(error)
    said = {"reason": first_line(error), "role": role}
    if kind is Kind.NOT_MIGRATED:
        return StoreNotMigrated(NOT_MIGRATED_MESSAGE.format(**said))
    if kind is Kind.PERMISSION_DENIED and role is None:
        return DatabasePermissionDenied(FILE_DENIED_MESSAGE.format(**said))
    if kind is Kind.PERMISSION_DENIED:
        return _naming_role(DatabasePermissionDenied(ROLE_DENIED_MESSAGE.format(**said)), role)
    if kind is Kind.LOGIN_REFUSED:
        return _naming_role(DatabaseLoginRefused(LOGIN_REFUSED_MESSAGE.format(**said)), role)
    if kind is Kind.READ_ONLY:
        return DatabaseReadOnly(READ_ONLY_MESSAGE.format(**said))
    if kind is Kind.CORRUPT:
        damaged = CORRUPT_FILE_MESSAGE if role is None else CORRUPT_DATA_MESSAGE
        return DatabaseCorrupt(damaged.format(**said))
    return None


def _naming_role(refusal: Unavailable, role: str | None) -> Unavailable:
    """``refusal`` with the role in its metadata, for a client that acts on it."""
    refusal.metadata = {"role": role or ""}
    return refusal
