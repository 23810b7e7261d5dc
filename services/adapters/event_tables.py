"""The event store's own tables (and, on PostgreSQL, the functions its saves and
readers call) as this release needs them, and which of them a database lacks.

Only a process that migrates makes them: `sessionstore migrate`, and a server or
worker that migrates at start (SESSIONSTORE_MIGRATE_AT_START, the default),
through the recorders as the store opens (services.adapters.event_store and
services.adapters.event_table_creation). A process told not to migrate, and a
command that only reads, look here first, on a plain connection, and refuse a
database that lacks any of them: opening the store there would make them, and a
wrong URL would leave an empty store behind that every later start took for a
store of no sessions.

Two of them hold what nothing else holds: the events (the log itself) and the
data keys that open the content sealed in them. Missing from a store that had
them, they are refused by every process, one that migrates included: made
again, empty, they would hide that every session was lost, or could no longer
be read (each would read as erased). Those must be restored from a backup.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect, text

from services.adapters import id_index, idempotency_keys, legacy_tenants, sealing
from services.adapters.postgres_schema import HEAD_FUNCTION_SUFFIX, INSERT_FUNCTION_SUFFIX

# The application's name: the library names its PostgreSQL tables after it
# (sessionstore_events), its SQLite tables after no name (stored_events).
STORE_NAME = "SessionStore"
# The tables kept beside the events, each named by the events' table and a suffix.
_BESIDE_EVENTS = (
    id_index.TABLE_SUFFIX,
    idempotency_keys.TABLE_SUFFIX,
    sealing.TABLE_SUFFIX,
    legacy_tenants.TABLE_SUFFIX,
)


def _postgres(env: dict[str, str]) -> bool:
    return env["PERSISTENCE_MODULE"] == "eventsourcing.postgres"


def _events_table(env: dict[str, str]) -> str:
    return f"{STORE_NAME.lower() if _postgres(env) else 'stored'}_events"


def event_tables(env: dict[str, str]) -> list[str]:
    """The tables the store of ``env`` (services.config.persistence_env) reads and writes."""
    events = _events_table(env)
    snapshots = events.removesuffix("_events") + "_snapshots"
    return [events, snapshots, *(events + suffix for suffix in _BESIDE_EVENTS)]


def event_functions(env: dict[str, str]) -> list[str]:
    """The stored functions the store calls (PostgreSQL only; none on SQLite)."""
    if not _postgres(env):
        return []
    events = _events_table(env)
    return [events + INSERT_FUNCTION_SUFFIX, events + HEAD_FUNCTION_SUFFIX]


def missing_event_tables(connection: Connection, env: dict[str, str]) -> list[str]:
    """The tables (and functions, named with "()") of the store that the database
    of ``connection`` lacks, in the schema ``env`` names; reads only."""
    schema = (env.get("POSTGRES_SCHEMA") or "public") if _postgres(env) else None
    present = set(inspect(connection).get_table_names(schema=schema))
    missing = [table for table in event_tables(env) if table not in present]
    functions = event_functions(env)
    if functions:
        found = connection.execute(
            text(
                "SELECT proname FROM pg_proc JOIN pg_namespace ON pg_namespace.oid = pronamespace "
                "WHERE nspname = :schema AND proname = ANY(:names)"
            ),
            {"schema": schema, "names": functions},
        )
        made = {str(row[0]) for row in found}
        missing += [f"{name}()" for name in functions if name not in made]
    return missing


def lost_event_tables(
    missing: list[str], env: dict[str, str], *, events_applied: bool = False
) -> list[str]:
    """Those of the ``missing`` tables (missing_event_tables) that the store had, and
    that must be restored rather than made again: the event log's once another table
    of the store is there (each is made with it or after it), or the read models
    applied events from it (``events_applied``); the data keys' once the legacy
    tenants' table is there (made after it, since the release that added it)."""
    events = _events_table(env)
    data_keys = events + sealing.TABLE_SUFFIX
    lost = []
    others = [table for table in event_tables(env) if table != events]
    if events in missing and (events_applied or any(t not in missing for t in others)):
        lost.append(events)
    if data_keys in missing and events + legacy_tenants.TABLE_SUFFIX not in missing:
        lost.append(data_keys)
    return lost


def describe_lost(lost: list[str], env: dict[str, str]) -> str:
    """Why the ``lost`` tables (lost_event_tables) are refused, and what to do, in one line."""
    events = _events_table(env)
    data_keys = events + sealing.TABLE_SUFFIX
    said = []
    if events in lost:
        said.append(
            f"the event log table {events} is missing from a store that had it (the "
            "events are the sessions: no command can make them again)"
        )
    if data_keys in lost:
        said.append(
            f"the data key table {data_keys} is missing from a store that had it (its "
            "keys open the content sealed in the events: without them every session "
            "reads as erased)"
        )
    them = "them" if len(lost) > 1 else "it"
    return (
        f"{'; and '.join(said)}: restore {them} from a backup of the database; "
        f"`sessionstore migrate` refuses to make {them} again, empty, which would hide "
        "the loss"
    )


def describe_missing(missing: list[str], env: dict[str, str]) -> str:
    """What ``missing`` (missing_event_tables) says, in a phrase."""
    if len(missing) == len(event_tables(env)) + len(event_functions(env)):
        return "no event store tables"
    return f"event store tables missing: {', '.join(missing)}"
