"""How every PostgreSQL connection of this process bounds its waits on a host that
stops answering (its packets dropped, not refused): the event store's pool and
probe, the compaction claims, the read models' engines and their connections of
their own (LISTEN, the worker's lease), all alike.

Without a connect timeout a connection waits for the OS to give up on a SYN left
unanswered (minutes), and for good once TCP is up and the server never answers
the startup packet; a pool counts it in use meanwhile, so the requests behind it
say the pool is busy rather than the database unreachable. Without keepalives a
connection made before the host went silent is found dead only when TCP gives up
on it (two hours idle, by Linux's defaults); and one whose statement went out
unacknowledged (packets dropped mid-query, the host's VM paused) waits for the
kernel's retransmissions to give up (about 15 minutes), its thread blocked.

A server whose process froze (stopped, or stuck on its storage) is none of these:
its kernel acknowledges everything and no client-side timeout of libpq ends a
statement on it. The database monitor's probe is bounded instead
(PROBE_REPLY_SECONDS): a server that gives it no reply counts as unreachable."""

from __future__ import annotations

from typing import Any

CONNECT_TIMEOUT_SECONDS = 2  # libpq's least
# Probes on an idle connection: a peer that stopped answering is found gone after
# about idle + interval x count seconds (25 s). Set on both ends: libpq's own make
# this side drop a connection to a server that vanished; the server's (sent as
# settings of the session) make PostgreSQL end the session of a client that
# vanished, which frees its locks (a worker's lease, a compaction's claim, a
# projection's tracking rows) for another process.
KEEPALIVE = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}
# A peer that leaves what was sent to it unacknowledged as long as one that answers no
# keepalive counts as gone, the same 25 s: libpq's tcp_user_timeout (milliseconds)
# drops the connection, and the statement waiting on it fails as a lost connection.
# Only the network's silence counts: a busy server's kernel acknowledges at once.
TCP_USER_TIMEOUT_MS = 1000 * (
    KEEPALIVE["keepalives_idle"] + KEEPALIVE["keepalives_interval"] * KEEPALIVE["keepalives_count"]
)
# How long the database monitor waits for the server's reply to its probe (SELECT 1
# on a connection of its own) before the database counts as not answering: requests
# are refused at once and health says NOT_SERVING. A server that answers takes
# milliseconds, even a busy one; one that takes seconds answers no request in time
# either. Above the connect timeout, so that a probe that reconnects first fails
# with the connection's own error; far below the keepalives' 25 s.
PROBE_REPLY_SECONDS = 3.0
_SERVER_KEEPALIVE = (
    f"-c tcp_keepalives_idle={KEEPALIVE['keepalives_idle']} "
    f"-c tcp_keepalives_interval={KEEPALIVE['keepalives_interval']} "
    f"-c tcp_keepalives_count={KEEPALIVE['keepalives_count']}"
)


def connect_settings(options: str = "") -> dict[str, Any]:
    """psycopg.connect's keyword arguments that bound a connection's waits on a host
    that stops answering; ``options``: more settings of the session (``-c name=value``)
    to send with the server's keepalives."""
    return {
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        **KEEPALIVE,
        "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
        "options": f"{_SERVER_KEEPALIVE} {options}".strip(),
    }
