"""Queries of the read models: filtered, keyset-paged, no business rules.

Every listing sorts on a key that never repeats (a notification id, with the
entry id for prunes), and its page token is that key: a row written while a
client pages lands after the token it holds or before it, never twice and
never in a gap.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, and_, exists, or_, select

from domain.errors import InvalidRequest
from services.adapters import read_model_tables as t
from services.adapters.read_model_db import ReadModelDatabase, reading

Row = Mapping[str, Any]
# A compaction done or failed, an undo of one, an undo taken back.
OUTCOMES = ("ok", "failed", "tainted", "undone", "redone")


@dataclass(frozen=True)
class CatalogFilter:
    labels: Mapping[str, str] = field(default_factory=dict)
    model: str = ""
    title_contains: str = ""
    updated_after_us: int | None = None
    updated_before_us: int | None = None
    # "created" (oldest first, the default) or "updated" (latest first).
    order_by: str = "created"
    # Only this tenant's sessions; None: every tenant's.
    tenant: str | None = None


@dataclass(frozen=True)
class AuditFilter:
    session_id: str = ""
    since_us: int | None = None
    until_us: int | None = None
    trigger: str = ""
    model: str = ""
    outcome: str = ""
    action: str = ""
    # Only the records of this tenant's sessions; None: every tenant's.
    tenant: str | None = None


def encode_token(*key: object) -> str:
    return base64.urlsafe_b64encode(":".join(map(str, key)).encode()).decode().rstrip("=")


def decode_token(token: str, parts: int) -> list[str]:
    if token.isascii() and token.isdigit():  # the numeric tokens of earlier versions
        key = [token]
    else:
        try:
            padded = token + "=" * (-len(token) % 4)
            key = base64.urlsafe_b64decode(padded.encode()).decode().split(":", parts - 1)
        except (ValueError, UnicodeDecodeError):
            raise InvalidRequest("page_token is not one this server gave out") from None
    if len(key) != parts or not _is_int64(key[0]):
        raise InvalidRequest("page_token is not one this server gave out")
    return key


def _is_int64(text: str) -> bool:
    try:
        return 0 <= int(text) < 1 << 63
    except ValueError:
        return False


def _of_tenant(query: Select[Any], session_id: Any, tenant: str | None) -> Select[Any]:
    """The audit rows of the tenant's sessions, as the catalog knows them."""
    if tenant is None:
        return query
    c = t.catalog.c
    return query.where(exists().where(and_(c.session_id == session_id, c.tenant == tenant)))


class ReadModelQueries:
    def __init__(self, database: ReadModelDatabase) -> None:
        self.database = database

    def _rows(self, query: Select[Any]) -> list[Row]:
        with reading(self.database.reader) as connection:
            return [dict(r._mapping) for r in connection.execute(query)]

    def sessions(self, where: CatalogFilter, limit: int, token: str) -> tuple[list[Row], str]:
        c = t.catalog.c
        if where.order_by not in ("created", "updated"):
            raise InvalidRequest(f"order_by {where.order_by!r}: use created or updated")
        newest_first = where.order_by == "updated"
        key = c.updated_position if newest_first else c.created_position
        query = select(t.catalog).where(c.erased == 0)
        if where.tenant is not None:
            query = query.where(c.tenant == where.tenant)
        for name, value in where.labels.items():
            label = t.catalog_labels.c
            query = query.where(
                exists().where(
                    and_(label.session_id == c.session_id, label.key == name, label.value == value)
                )
            )
        if where.model:
            query = query.where(c.model == where.model)
        if where.title_contains:
            query = query.where(c.title.icontains(where.title_contains, autoescape=True))
        if where.updated_after_us is not None:
            query = query.where(c.updated_us >= where.updated_after_us)
        if where.updated_before_us is not None:
            query = query.where(c.updated_us < where.updated_before_us)
        if token:
            (after,) = decode_token(token, 1)
            query = query.where(key < int(after) if newest_first else key > int(after))
        query = query.order_by(key.desc() if newest_first else key).limit(limit + 1)
        rows = self._rows(query)
        more = len(rows) > limit
        rows = rows[:limit]
        sort = "updated_position" if newest_first else "created_position"
        return rows, encode_token(rows[-1][sort]) if more else ""

    def compactions(self, where: AuditFilter, limit: int, token: str) -> tuple[list[Row], str]:
        c = t.compactions.c
        query = _of_tenant(select(t.compactions), c.session_id, where.tenant)
        if where.session_id:
            query = query.where(c.session_id == where.session_id)
        if where.since_us is not None:
            query = query.where(c.recorded_us >= where.since_us)
        if where.until_us is not None:
            query = query.where(c.recorded_us < where.until_us)
        if where.trigger:
            query = query.where(c.trigger == where.trigger)
        if where.model:
            query = query.where(c.summarizer_model == where.model)
        if where.outcome:
            if where.outcome not in OUTCOMES:
                raise InvalidRequest(
                    f"outcome {where.outcome!r}: use one of {', '.join(OUTCOMES)}, or leave it "
                    "empty for all"
                )
            query = query.where(c.outcome == where.outcome)
        if token:
            (after,) = decode_token(token, 1)
            query = query.where(c.position > int(after))
        rows = self._rows(query.order_by(c.position).limit(limit + 1))
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, encode_token(rows[-1]["position"]) if more else ""

    def compaction(self, session_id: str, version: int) -> Row | None:
        c = t.compactions.c
        rows = self._rows(
            select(t.compactions).where(c.session_id == session_id, c.version == version)
        )
        return rows[0] if rows else None

    def compactions_at(self, session_id: str, versions: Sequence[int]) -> list[Row]:
        """The session's audit rows recorded at these versions, oldest first."""
        c = t.compactions.c
        if not versions:
            return []
        return self._rows(
            select(t.compactions)
            .where(c.session_id == session_id, c.version.in_(list(versions)))
            .order_by(c.version)
        )

    def previous_cut(self, session_id: str, version: int) -> int:
        """The first kept position of the session's compaction before ``version`` (0 if none)."""
        c = t.compactions.c
        rows = self._rows(
            select(c.first_kept_position)
            .where(c.session_id == session_id, c.version < version, c.outcome == "ok")
            .order_by(c.version.desc())
            .limit(1)
        )
        return int(rows[0]["first_kept_position"]) if rows else 0

    def prunes(self, where: AuditFilter, limit: int, token: str) -> tuple[list[Row], str]:
        c = t.prunes.c
        query = _of_tenant(select(t.prunes), c.session_id, where.tenant)
        if where.session_id:
            query = query.where(c.session_id == where.session_id)
        if where.since_us is not None:
            query = query.where(c.recorded_us >= where.since_us)
        if where.until_us is not None:
            query = query.where(c.recorded_us < where.until_us)
        if where.action:
            query = query.where(c.action == where.action)
        if token:
            after, entry_id = decode_token(token, 2)
            query = query.where(
                (c.position > int(after)) | and_(c.position == int(after), c.entry_id > entry_id)
            )
        rows = self._rows(query.order_by(c.position, c.entry_id).limit(limit + 1))
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, encode_token(rows[-1]["position"], rows[-1]["entry_id"]) if more else ""

    def retention_candidates(
        self,
        tenants: Sequence[str] | None,
        idle_before_us: int | None,
        created_before_us: int | None,
    ) -> list[str]:
        """The sessions not erased, of these tenants (every tenant's when None), idle
        since one time or before, or started at another or before, oldest first: the catalog's
        guess, which retention checks against the store (the catalog may lag)."""
        c = t.catalog.c
        older = []
        if idle_before_us is not None:
            older.append(c.updated_us <= idle_before_us)
        if created_before_us is not None:
            older.append(c.created_us <= created_before_us)
        if not older:
            return []
        query = select(c.session_id).where(c.erased == 0, or_(*older))
        if tenants is not None:
            query = query.where(c.tenant.in_(list(tenants)))
        return [str(row["session_id"]) for row in self._rows(query.order_by(c.created_position))]
