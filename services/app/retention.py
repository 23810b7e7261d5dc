"""Retention: plan which sessions the policies say are due, and erase them.

``plan`` asks the session catalog for candidates (sessions of the policies'
tenants idle or old enough under the loosest limit), then judges each on the
event store's own copy (the catalog may lag): its labels, its last event's
time (idle), its first event's time (age). A due session is erased as
EraseSession erases it, forks included; so a session is planned only when
every fork that would go with it (in its tenant) is due under a policy too,
else it is held back and the plan says why: retention never removes a session
no policy makes due.

``apply`` checks each planned session against the store again just before it
acts: one written to since the plan (its version moved), forked since, erased
since, or no longer due is left alone for the next run; the erasure itself is
saved only at the planned version. Export-then-erase writes every export
file of the removal first, and erases nothing when one fails.

Each removal is recorded as erasure events (``erased_by`` ``retention``, the
reason naming the policy and the limit passed), exactly those EraseSession
records: the content's keys are deleted, the forks follow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import structlog

from domain.erasure import SessionWasErased
from domain.errors import DomainError, VersionConflict, quoted
from domain.retention import (
    ANY_TENANT,
    RetentionAction,
    RetentionPolicy,
    SessionFacts,
    Verdict,
    cutoffs,
    judge,
)
from domain.session import Session
from services.adapters.read_model_queries import ReadModelQueries
from services.adapters.read_model_writers import micros
from services.adapters.retention_exports import export_path, write_export
from services.app.imports import ImportService
from services.app.sessions import SessionService

ERASED_BY = "retention"
# Candidates judged per read of the store, unless told otherwise.
PLAN_BATCH = 200
log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class PlannedRemoval:
    """A session due to go, and the forks that go with it (each due too)."""

    verdict: Verdict
    forks: tuple[Verdict, ...] = ()

    @property
    def session_id(self) -> str:
        return self.verdict.session.session_id

    @property
    def sessions(self) -> tuple[Verdict, ...]:
        return (self.verdict, *self.forks)


@dataclass(frozen=True)
class HeldBack:
    """A due session kept, because erasing it would erase a fork that is not due."""

    verdict: Verdict
    why: str


@dataclass(frozen=True)
class RetentionPlan:
    at: datetime
    removals: tuple[PlannedRemoval, ...]
    held: tuple[HeldBack, ...] = ()

    @property
    def session_count(self) -> int:
        return sum(len(r.sessions) for r in self.removals)


@dataclass
class RetentionOutcome:
    """What one apply did: sessions erased (forks included), export files written,
    sessions left for the next run (and why), removals that failed (and why)."""

    erased: list[str] = field(default_factory=list)
    exported: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def reason(verdict: Verdict) -> str:
    """Why a session goes, as its erasure records it."""
    assert verdict.policy is not None
    return f"retention policy {quoted(verdict.policy.name)}: {'; '.join(verdict.reasons)}"


class RetentionService:
    def __init__(
        self,
        sessions: SessionService,
        catalog: ReadModelQueries,
        clock: Callable[[], datetime] | None = None,
        batch: int = PLAN_BATCH,
    ) -> None:
        self.sessions = sessions
        self.catalog = catalog
        self.clock = clock or (lambda: datetime.now(UTC))
        # Candidates judged per read of the store.
        self.batch = batch
        self._exports = ImportService(sessions)

    # -- plan ---------------------------------------------------------------------

    def plan(
        self, policies: Sequence[RetentionPolicy], at: datetime | None = None
    ) -> RetentionPlan:
        """What the policies remove at ``at`` (now), and what they hold back."""
        now = at or self.clock()
        if not policies:
            return RetentionPlan(now, ())
        idle_cut, age_cut = cutoffs(policies, now)
        tenants = (
            None if any(p.tenant == ANY_TENANT for p in policies) else [p.tenant for p in policies]
        )
        candidates = self.catalog.retention_candidates(
            tenants,
            micros(idle_cut) if idle_cut else None,
            micros(age_cut) if age_cut else None,
        )
        verdicts: dict[str, Verdict | None] = {}

        def judge_all(session_ids: Sequence[str]) -> None:
            unjudged = [s for s in session_ids if s not in verdicts]
            found = self._facts_of(unjudged)
            for session_id in unjudged:
                facts = found.get(session_id)
                verdicts[session_id] = None if facts is None else judge(facts, policies, now)

        removals: list[PlannedRemoval] = []
        held: list[HeldBack] = []
        for start in range(0, len(candidates), self.batch):
            batch = candidates[start : start + self.batch]
            judge_all(batch)
            due = [v for s in batch if (v := verdicts[s]) is not None and v.due]
            forks_of = self._forks([verdict.session for verdict in due])
            for verdict in due:
                forks: list[Verdict] = []
                kept: Verdict | None = None
                for fork_id, fork_facts in forks_of[verdict.session.session_id].items():
                    if fork_id not in verdicts:
                        verdicts[fork_id] = judge(fork_facts, policies, now)
                    fork = verdicts[fork_id]
                    if fork is None or fork.session.erased:
                        continue
                    if not fork.due:
                        kept = fork
                        break
                    forks.append(fork)
                if kept is not None:
                    why = (
                        f"its fork {kept.session.session_id} would be erased with it and is "
                        f"not due ({'; '.join(kept.reasons)})"
                    )
                    held.append(HeldBack(verdict, why))
                else:
                    removals.append(PlannedRemoval(verdict, tuple(forks)))
        # A fork that goes with its parent is listed there, not on its own.
        with_parent = {f.session.session_id for r in removals for f in r.forks}
        kept_removals = tuple(r for r in removals if r.session_id not in with_parent)
        return RetentionPlan(now, kept_removals, tuple(held))

    def _facts_of(self, session_ids: Sequence[str]) -> dict[str, SessionFacts]:
        """The sessions' facts as the store holds them, read together (a plan's
        candidates may be thousands of sessions: a few queries, not one each).
        Sessions no longer stored are left out."""
        return {s.id: _facts_from(s) for s in self.sessions.get_sessions(session_ids)}

    def _forks(self, roots: Sequence[SessionFacts]) -> dict[str, dict[str, SessionFacts]]:
        """For each root, the sessions EraseSession of it would follow into, with their
        facts: its forks, and theirs, in its tenant (by the links the forks' own
        transactions wrote). Walked a generation at a time for all the roots at once:
        two reads a generation, however many roots."""
        found: dict[str, dict[str, SessionFacts]] = {r.session_id: {} for r in roots}
        seen = {r.session_id: {r.session_id} for r in roots}
        parents = {r.session_id: [r.session_id] for r in roots}
        while any(parents.values()):
            links = self.sessions.store.forks_of_each([p for ps in parents.values() for p in ps])
            linked = {
                root: [f for p in ps for f, _ in links.get(p, ()) if f not in seen[root]]
                for root, ps in parents.items()
            }
            facts = self._facts_of(list({f for forks in linked.values() for f in forks}))
            for root in roots:
                forks = linked[root.session_id]
                seen[root.session_id].update(forks)
                ours = [f for f in forks if f in facts and facts[f].tenant == root.tenant]
                found[root.session_id].update((f, facts[f]) for f in ours)
                parents[root.session_id] = ours
        return found

    # -- apply --------------------------------------------------------------------

    def apply(self, plan: RetentionPlan, policies: Sequence[RetentionPolicy]) -> RetentionOutcome:
        """Erases what ``plan`` lists that is still as planned and still due now."""
        outcome = RetentionOutcome()
        for removal in plan.removals:
            try:
                self._apply_one(removal, policies, outcome)
            except DomainError as error:  # the database away, a deadline: the next run retries
                outcome.failed.append((removal.session_id, f"not erased: {error}"))
                log.warning(
                    "retention: not erased", session_id=removal.session_id, error=str(error)
                )
        return outcome

    def _apply_one(
        self,
        removal: PlannedRemoval,
        policies: Sequence[RetentionPolicy],
        outcome: RetentionOutcome,
    ) -> None:
        why_not = self._changed_since(removal, policies)
        if why_not is not None:
            outcome.skipped.append((removal.session_id, why_not))
            return
        try:
            exported = self._export(removal)
        except Exception as error:
            why = f"export failed, nothing erased: {error}"
            outcome.failed.append((removal.session_id, why))
            log.warning("retention: not erased", session_id=removal.session_id, error=why)
            return
        outcome.exported.extend(exported)
        try:
            self._erase(removal, outcome)
        except (VersionConflict, SessionWasErased):
            outcome.skipped.append(
                (removal.session_id, "written or erased as it was about to be erased")
            )

    def _changed_since(
        self, removal: PlannedRemoval, policies: Sequence[RetentionPolicy]
    ) -> str | None:
        """Why a planned removal no longer stands, checked on the store; None if it does."""
        now = self.clock()
        stored = self._facts_of([planned.session.session_id for planned in removal.sessions])
        for planned in removal.sessions:
            facts = stored.get(planned.session.session_id)
            if facts is None:
                return f"{planned.session.session_id} is gone"
            if facts.erased:
                return f"{facts.session_id} was erased since the plan"
            if facts.version != planned.session.version:
                return (
                    f"{facts.session_id} was written since the plan (version "
                    f"{planned.session.version} then, {facts.version} now)"
                )
            if not judge(facts, policies, now).due:
                return f"{facts.session_id} is no longer due"
        root = removal.verdict.session
        planned_forks = {f.session.session_id for f in removal.forks}
        forks = self._forks([root])[root.session_id]
        forks_now = {f for f, facts in forks.items() if not facts.erased}
        if forks_now != planned_forks:
            return f"{root.session_id} was forked since the plan"
        return None

    def _export(self, removal: PlannedRemoval) -> list[Path]:
        written = []
        for verdict in removal.sessions:
            policy = verdict.policy
            assert policy is not None
            if policy.action is not RetentionAction.EXPORT_THEN_ERASE:
                continue
            session = verdict.session
            tenant, own_id = self.sessions.ids.tenant_and_id(session.session_id)
            path = export_path(Path(policy.export_dir), tenant, own_id)
            write_export(path, self._exports.export_pi(session.session_id, session.version))
            written.append(path)
        return written

    def _erase(self, removal: PlannedRemoval, outcome: RetentionOutcome) -> None:
        root = removal.verdict
        _, _, forks = self.sessions.erase_session(
            root.session.session_id,
            erased_by=ERASED_BY,
            reason=reason(root),
            expected_version=root.session.version,
        )
        # EraseSession also names forks erased before (it walks through them): only
        # those this removal found not yet erased count as erased now.
        planned = {f.session.session_id for f in removal.forks}
        now_erased = [f for f in forks if f in planned]
        outcome.erased.append(root.session.session_id)
        outcome.erased.extend(now_erased)
        log.info(
            "retention: erased",
            session_id=root.session.session_id,
            forks=now_erased,
            reason=reason(root),
        )


def _facts_from(session: Session) -> SessionFacts:
    return SessionFacts(
        session_id=session.id,
        tenant=session.tenant,
        labels=dict(session.settings.labels),
        created=session.created_on,
        last_event=session.modified_on,
        version=session.version,
        erased=session.erased,
    )
