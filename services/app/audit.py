"""Queries answered from the SQL read models: the session catalog and the audits.

Listings wait until the read models have reached the position the client
asks for (read-your-writes across servers); the rows come from SQL, and a
compaction's summary and the entries it replaced from the session's own
history, which the read models need not copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from domain.compaction import Compaction
from domain.content import Entry
from domain.errors import InvalidRequest, NotFound, PreconditionFailed, quoted
from domain.session import Session
from services.adapters.read_model_queries import AuditFilter, CatalogFilter
from services.adapters.read_model_store import Quarantined
from services.app import tenancy
from services.app.sessions import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, SessionService
from services.readmodels import ReadModels
from services.readmodels.service import ModelStatus

# The outcomes of a compaction recorded in the log, whose receipt GetCompaction shows:
# one in force or once in force, and one an erasure reached (its summary erased, still
# in force until a compaction replaces it). A failure, an undo and a redo have none.
RECORDED = ("ok", "tainted")

Row = Mapping[str, Any]


class ReadModelsOff(PreconditionFailed):
    """This server keeps no read models (memory: database, or SESSIONSTORE_PROJECTIONS=off)."""

    reason = "read_models_off"


class CompactionNotFound(NotFound):
    reason = "compaction_not_found"


@dataclass(frozen=True)
class CompactionDetail:
    row: Row
    compaction: Compaction | None
    # The replaced entries and the versions that appended them.
    replaced: Sequence[tuple[Entry, int]]
    in_force: bool = False
    # The audit rows of the undos that took it back and the redos that
    # re-applied it, oldest first.
    changes: Sequence[Row] = ()
    # The key of the Compact call that recorded it ("" for any other).
    idempotency_key: str = ""


def page_size(size: int) -> int:
    if size < 0:
        raise InvalidRequest(
            f"page_size {size} is negative; send 1 to {MAX_PAGE_SIZE}, or 0 for {DEFAULT_PAGE_SIZE}"
        )
    return min(size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


class AuditService:
    def __init__(self, sessions: SessionService, read_models: ReadModels | None) -> None:
        self.sessions = sessions
        self.read_models = read_models

    def _models(self) -> ReadModels:
        if self.read_models is None:
            raise ReadModelsOff(
                "this server keeps no read models (SESSIONSTORE_PROJECTIONS=off or a memory: "
                "database): the audit and catalog filters are not available"
            )
        return self.read_models

    def read_model_status(self) -> tuple[int, list[ModelStatus], list[Quarantined]]:
        """The store's head, each read model's progress, the latest quarantined events."""
        models = self._models()
        statuses = models.status()
        return statuses[0].head if statuses else 0, statuses, models.recently_quarantined()

    def list_sessions(
        self,
        where: CatalogFilter,
        size: int,
        token: str,
        min_position: int,
        deadline: float | None,
    ) -> tuple[list[Session], str, int]:
        """A page of sessions from the catalog, the next page's token and the
        catalog's position; without read models, unfiltered from the event store.
        Only the caller's tenant's sessions, unless the caller sees every tenant."""
        if self.read_models is None and where == CatalogFilter():
            return self._list_from_store(size, token)
        models = self._models()
        position = models.wait_for(["catalog"], min_position, deadline)
        where = replace(where, tenant=tenancy.tenant_filter())
        rows, next_token = models.queries.sessions(where, page_size(size), token)
        sessions = self.sessions.get_sessions([r["session_id"] for r in rows])
        return sessions, next_token, position

    def _list_from_store(self, size: int, token: str) -> tuple[list[Session], str, int]:
        try:
            after = int(token or 0)
        except ValueError:
            raise InvalidRequest("page_token is not one this server gave out") from None
        sessions, next_after = self.sessions.list_sessions(size, after)
        return sessions, str(next_after) if next_after else "", 0

    def list_compactions(
        self, where: AuditFilter, size: int, token: str, min_position: int, deadline: float | None
    ) -> tuple[list[Row], str, int]:
        models = self._models()
        where = replace(where, tenant=tenancy.tenant_filter())
        # A tenant's records are told by the catalog: it must be as far on.
        names = ["compactions"] if where.tenant is None else ["catalog", "compactions"]
        position = models.wait_for(names, min_position, deadline)
        rows, next_token = models.queries.compactions(where, page_size(size), token)
        return rows, next_token, position

    def list_prunes(
        self, where: AuditFilter, size: int, token: str, min_position: int, deadline: float | None
    ) -> tuple[list[Row], str, int]:
        models = self._models()
        where = replace(where, tenant=tenancy.tenant_filter())
        names = ["prunes"] if where.tenant is None else ["catalog", "prunes"]
        position = models.wait_for(names, min_position, deadline)
        rows, next_token = models.queries.prunes(where, page_size(size), token)
        return rows, next_token, position

    def get_compaction(
        self, session_id: str, version: int, min_position: int, deadline: float | None
    ) -> CompactionDetail:
        """The audit row, the receipt with its summary, and the entries it replaced:
        those between the previous compaction's cut and this one's first kept entry."""
        models = self._models()
        self.sessions.get_session(session_id)  # NOT_FOUND for another tenant's session
        models.wait_for(["compactions"], min_position, deadline)
        row = models.queries.compaction(session_id, version)
        if row is None:
            # Named by its stream here; the caller's scope renames it to the caller's id.
            raise CompactionNotFound(
                f"no compaction recorded at version {version} of session {quoted(session_id)}"
            ).about(session_id)
        if row["outcome"] not in RECORDED:
            return CompactionDetail(row, None, ())
        history = self.sessions.history(session_id)
        recorded = next(c for c in history.compactions(version) if c.version == version)
        before = history.durable_log(version - 1)
        count = recorded.first_kept_position - before.first_position
        replaced = list(zip(before.entries[:count], before.entry_versions[:count], strict=True))

        def in_force_at(at: int | None = None) -> bool:
            return any(c.version == version for c in history.compactions_in_force(at))

        # The undos and redos that changed whether this compaction is in force.
        changed = [u.version for u in history.undos()] + [r.version for r in history.redos()]
        touched = [v for v in changed if in_force_at(v - 1) != in_force_at(v)]
        changes = models.queries.compactions_at(session_id, sorted(touched))
        in_force = in_force_at()
        return CompactionDetail(
            row, recorded.compaction, replaced, in_force, changes, recorded.idempotency_key
        )
