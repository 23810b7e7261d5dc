"""What stops a process at its start, said in one line.

The server, the worker and the CLI's database commands all connect to the
store themselves; a misconfigured or unreachable database, a file that cannot
be read or a taken address ends each of them with one line saying which,
never a traceback.
"""

from __future__ import annotations

from urllib.parse import urlparse

import psycopg
import sqlalchemy.exc
from eventsourcing.persistence import PersistenceError

from domain.errors import Unavailable


class StartRefused(Exception):
    """The store is not in a state this process may start on (its tables missing or
    not migrated, for a process told not to migrate or that only reads); the message
    says what to run."""


# What stops a server, a worker or an admin command at its start: a misconfigured
# or unreachable database, a file that cannot be read, a taken address, a store
# not ready for this release, a role without a grant (the last three also as the
# refusals a call would answer: services.adapters.database_refusals). Each is said
# in one line (start_refusal).
START_ERRORS: tuple[type[Exception], ...] = (
    StartRefused,
    Unavailable,
    OSError,
    ValueError,
    PersistenceError,
    psycopg.Error,
    sqlalchemy.exc.SQLAlchemyError,
)


def start_refusal(error: Exception) -> str:
    """One line saying what stopped a start."""
    if isinstance(error, sqlalchemy.exc.DBAPIError):
        # The driver's words, without SQLAlchemy's statement and link.
        error = error.orig if isinstance(error.orig, Exception) else error
    return " ".join(str(error).split())


def redacted(database_url: str) -> str:
    """The URL to log: its password hidden."""
    url = urlparse(database_url)
    if url.password:
        return database_url.replace(f":{url.password}@", ":***@")
    return database_url
