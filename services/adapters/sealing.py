"""Content sealed under data keys, so that deleting a key erases what it sealed.

Every entry's content (blocks and metadata) is sealed under a data key of its
own, and every other event that carries content (a system prompt, a
compaction's summary) under a key of that event. Keys are random 256-bit
AES-GCM keys kept in a mutable table beside the events, written in the same
transaction; the events keep only ciphertext, next to the structure (ids,
roles, counts, tool call ids) in the clear. Erasing deletes the key rows: the
ciphertext left in the events, snapshots and backups is then unreadable
("crypto-shredding").

A key is named ``(session id, version, kind, key id)``: ``ENTRY`` keys by the
entry's id (the version is the event that appended it), ``EVENT`` keys by the
event's version (key id empty), ``SNAPSHOT`` keys by the version of the
snapshot whose settings (the title) they seal. The name is also the ciphertext's associated
data, so a ciphertext cannot be moved to another entry or session and opened
there.

The transcodings in services.adapters.event_store seal and open through the
``KeyScope`` the event store sets for the event being mapped.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

ENTRY = "entry"
EVENT = "event"
SNAPSHOT = "snapshot"
KEY_BYTES = 32
NONCE_BYTES = 12
TABLE_SUFFIX = "_data_keys"

KeyName = tuple[str, int, str, str]
"""(session id, version, kind, key id)."""
DataKeyRow = tuple[str, int, str, str, bytes]
"""A key row as stored: the name and the 32 key bytes."""
KeyRange = tuple[int, int | None]
"""The versions (after, upto] of a session whose keys a read loads; upto None: all."""
ShredRow = tuple[str, int, str, str]
"""Which keys an erasure deletes: (session id, version, kind, key id); version -1
matches any version, kind "" every key of the session."""


class KeyMissing(LookupError):
    """The key that sealed a value is gone: the value was erased."""


def new_key() -> bytes:
    return os.urandom(KEY_BYTES)


def _associated_data(name: KeyName) -> bytes:
    session_id, version, kind, key_id = name
    return f"{session_id}\x00{version if kind != ENTRY else 0}\x00{kind}\x00{key_id}".encode()


def seal(key: bytes, name: KeyName, plaintext: bytes) -> str:
    """Nonce and ciphertext, base64, for a JSON field."""
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, plaintext, _associated_data(name))
    return base64.b64encode(nonce + sealed).decode("ascii")


def open_sealed(key: bytes, name: KeyName, sealed: str) -> bytes:
    """The plaintext; raises InvalidTag unless the key and name are those it was sealed with."""
    raw = binascii.a2b_base64(sealed)  # b64decode's checks and copies, without them
    return AESGCM(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _associated_data(name))


@dataclass
class KeyScope:
    """The keys one event is mapped with: its session and version, and a way to find keys.

    Writing, ``keys`` holds the keys made for the event; reading, ``lookup``
    finds a key by its (kind, key id) for this event, or None when it was deleted.
    ``own_kind`` is the kind of the key of the whole record being mapped: EVENT
    for an event, SNAPSHOT for a snapshot.
    """

    session_id: str
    version: int
    keys: Mapping[tuple[str, str], bytes] = field(default_factory=dict)
    lookup: Callable[[str, str], bytes | None] | None = None
    own_kind: str = EVENT

    def name(self, kind: str, key_id: str) -> KeyName:
        return (self.session_id, self.version, kind, key_id)

    def key(self, kind: str, key_id: str) -> bytes | None:
        found = self.keys.get((kind, key_id))
        if found is None and self.lookup is not None:
            found = self.lookup(kind, key_id)
        return found

    def seal(self, kind: str, key_id: str, plaintext: bytes) -> str:
        key = self.keys.get((kind, key_id))
        if key is None:
            # Storing content without a key would store it in the clear.
            raise KeyMissing(f"no data key was made for {kind} {key_id!r} of {self.session_id}")
        return seal(key, self.name(kind, key_id), plaintext)

    def open(self, kind: str, key_id: str, sealed: str) -> bytes:
        """The plaintext, or KeyMissing when its key was deleted (or does not open it)."""
        # key() inlined: this runs for every entry a read decodes.
        key = self.keys.get((kind, key_id)) if self.keys else None
        if key is None and self.lookup is not None:
            key = self.lookup(kind, key_id)
        if key is None:
            raise KeyMissing(f"{kind} {key_id!r} of {self.session_id} was erased")
        try:
            return open_sealed(key, self.name(kind, key_id), sealed)
        except InvalidTag:
            raise KeyMissing(f"{kind} {key_id!r} of {self.session_id} does not open") from None


_scope: ContextVar[KeyScope | None] = ContextVar("sealing_scope", default=None)


def current_scope() -> KeyScope:
    scope = _scope.get()
    if scope is None:
        raise KeyMissing("no key scope is set: content is sealed only by the event store")
    return scope


class scoped:
    """Sets the key scope for the block. A class, not a generator: it is entered for
    every event mapped, and contextlib's generator machinery costs several times more."""

    __slots__ = ("_scope", "_token")

    def __init__(self, scope: KeyScope) -> None:
        self._scope = scope

    def __enter__(self) -> None:
        self._token = _scope.set(self._scope)

    def __exit__(self, *exc: object) -> None:
        _scope.reset(self._token)


def shred_matches(shred: ShredRow, name: tuple[int, str, str]) -> bool:
    """Whether an erasure's row deletes the key named (version, kind, key id) of its session."""
    _, version, kind, key_id = shred
    if not kind:
        return True
    return name[1] == kind and name[2] == key_id and version in (-1, name[0])


def warm_up() -> None:
    """Seals and opens once, so that the cipher's first use (about a millisecond of
    library set-up) falls at start rather than in the first request."""
    name: KeyName = ("warm-up", 0, EVENT, "")
    key = new_key()
    open_sealed(key, name, seal(key, name, b"warm up"))
