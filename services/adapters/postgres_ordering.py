"""Notification ids that readers can follow, with no lock that every save waits for.

A reader that pages the log by notification id (a read model, a subscription)
must never pass over an id that commits later. The library keeps ids in
commit order by taking a table lock in every save, so saves queue one behind
another for the whole of their transactions, and their commits cannot share
a flush of the WAL. Here saves run side by side and readers learn how far it
is safe to read:

- A save takes its ids as one block: one ``nextval`` of a sequence stepping
  ``BLOCK`` at a time, the events numbered from the block's first id. One
  save's ids are contiguous and never interleave with another's.
- While its transaction runs it holds two shared advisory locks, which end
  with it: "writing", taken before it draws its block, and one naming the
  block (its number, modulo 2^32). Shared: saves never wait for each other.
- A reader's head (``head()``, a function called in one round trip) is the
  last id drawn, or the id before the lowest block still being written, when
  one is. A save seen "writing" without a block is drawing one: the reader
  looks again a moment later (the window is one ``nextval``). The ids up to
  the head are then all committed or rolled back, and the head's query reads
  them in a snapshot taken after it looked, as does every later query.

Only saves hold readers back, and only while they run: a long transaction
elsewhere in the cluster (a migration, a read model's batch waiting for a
lock) does not. Ids are sparse (``BLOCK`` apart between saves), so a count of
events between two positions is counted, not subtracted. Servers of every
release call the function by its name, so once one of this release has
replaced it they all save this way; a save under way in the function it
replaced holds the table lock, and a reader waits that out like a save
drawing its block.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

# Ids one save may take: far more than a save holds (group commit batches a few
# hundred events), and 2^43 saves before the bigint ids run out.
BLOCK = 1 << 20
_WRAP = 1 << 32
# A reader waits this long at most for a save that is drawing its block.
_DRAWING_WAIT_SECONDS = 0.0002
_DRAWING_TRIES = 5000


def lock_tags(cursor: Any, qualified_table: str) -> tuple[int, int]:
    """The advisory lock classes of this events table: (writing, block), apart from
    every other table's and from the one-key locks used elsewhere."""
    cursor.execute(
        "SELECT hashtext(%s) AS writing, hashtext(%s) AS block",
        (f"{qualified_table}:writing", f"{qualified_table}:block"),
    )
    row = cursor.fetchone()
    return int(row["writing"]), int(row["block"])


def step_sequence(cursor: Any, qualified_table: str) -> str:
    """Makes the id sequence step one block at a time (once, on a database written
    with the table lock: ids from then on are BLOCK apart between saves); answers
    its name."""
    cursor.execute(
        "SELECT s.seqrelid::regclass::text AS name, s.seqincrement AS step "
        "FROM pg_sequence s WHERE s.seqrelid = "
        "pg_get_serial_sequence(%s, 'notification_id')::regclass",
        (qualified_table,),
    )
    row = cursor.fetchone()
    if row["step"] != BLOCK:
        cursor.execute(
            sql.SQL("ALTER SEQUENCE {} INCREMENT BY {}").format(
                sql.SQL(row["name"]), sql.Literal(BLOCK)
            )
        )
    return str(row["name"])


def draw_block_sql(names: dict[str, Any]) -> sql.Composed:
    """The part of the insert function that draws the save's block (see above); sets
    ``base``, the first id. Needs ``n`` (the events saved) declared."""
    return sql.SQL(
        "IF n > {block} THEN RAISE EXCEPTION 'one save of % events is more than {block}', n; "
        "END IF; "
        "IF n > 0 THEN "
        "PERFORM pg_advisory_xact_lock_shared({writing}, 0); "
        "base := nextval({sequence}::regclass); "
        "PERFORM pg_advisory_xact_lock_shared({block_tag}, ((base / {block})::bit(32))::int); "
        "END IF; "
    ).format(
        block=sql.Literal(BLOCK),
        writing=sql.Literal(names["writing_tag"]),
        block_tag=sql.Literal(names["block_tag"]),
        sequence=sql.Literal(names["sequence"]),
    )


def create_head_function(cursor: Any, names: dict[str, Any]) -> None:
    """``{head}()``: the highest notification id a reader may read up to (see above),
    NULL while no event is stored."""
    cursor.execute(
        sql.SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{head}() RETURNS bigint "
            "LANGUAGE plpgsql VOLATILE AS $$ "
            "DECLARE drawn bigint; lowest bigint; drawing boolean; safe bigint; "
            "tries integer := 0; found bigint; "
            "BEGIN LOOP "
            "SELECT CASE WHEN is_called THEN last_value END INTO drawn "
            "FROM {sequence}; "
            "IF drawn IS NULL THEN RETURN NULL; END IF; "
            # Every lock of this table's saves, once: who writes, which blocks. A
            # block's number from its low 32 bits, as its distance from the last
            # block drawn: the nearest, within 2^31 blocks either way. Blocks drawn
            # since ``drawn`` was read (ahead of it) are beyond what is read here.
            "WITH held AS (SELECT virtualtransaction AS vt, classid::bigint AS tag, "
            "((objid::bigint - drawn / {block}) % {wrap} + {wrap} + {half}) % {wrap} - {half} "
            "AS ahead FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND objsubid = 2 AND database = (SELECT oid FROM pg_database "
            "WHERE datname = current_database()) "
            "AND classid::bigint IN ({writing}, {block_tag})) "
            "SELECT bool_or(w.tag = {writing} AND NOT EXISTS ("
            "SELECT 1 FROM held b WHERE b.vt = w.vt AND b.tag = {block_tag})), "
            "min(CASE WHEN w.tag = {block_tag} AND w.ahead <= 0 "
            "THEN drawn / {block} + w.ahead END) "
            "INTO drawing, lowest FROM held w; "
            "drawing := coalesce(drawing, false) OR EXISTS (SELECT 1 FROM pg_locks "
            "WHERE locktype = 'relation' AND granted AND mode = 'ExclusiveLock' "
            "AND relation = {qualified}::regclass); "
            "EXIT WHEN NOT drawing; "
            "tries := tries + 1; "
            "IF tries > {tries} THEN RAISE EXCEPTION 'saves kept drawing ids: try again'; "
            "END IF; "
            "PERFORM pg_sleep({pause}); "
            "END LOOP; "
            # The last block drawn, whole; or up to the lowest block still being
            # written (every first id shares the remainder of the last one drawn).
            "safe := CASE WHEN lowest IS NULL THEN drawn + {block} - 1 "
            "ELSE lowest * {block} + drawn % {block} - 1 END; "
            # A statement of its own: its snapshot is taken after the look above.
            "SELECT max(notification_id) INTO found FROM {schema}.{table} "
            "WHERE notification_id <= safe; "
            "RETURN found; "
            "END $$"
        ).format(
            schema=names["schema"],
            table=names["table"],
            head=sql.Identifier(names["head_function"]),
            sequence=sql.SQL(names["sequence"]),
            # pg_locks shows a lock's int4 keys as unsigned oids.
            writing=sql.Literal(names["writing_tag"] % _WRAP),
            block_tag=sql.Literal(names["block_tag"] % _WRAP),
            qualified=sql.Literal(names["qualified"]),
            block=sql.Literal(BLOCK),
            wrap=sql.Literal(_WRAP),
            half=sql.Literal(_WRAP // 2),
            tries=sql.Literal(_DRAWING_TRIES),
            pause=sql.Literal(_DRAWING_WAIT_SECONDS),
        )
    )
