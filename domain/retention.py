"""Retention: which sessions a policy says are due to go, and why.

Pure rules, no I/O. A policy names a tenant (or ``*`` for every tenant) and a
label selector (every label it names must be on the session, with that value);
it sets how long a session may stay idle (from its last event) and how old it
may grow (from its first event) before it is erased, and whether it is exported
first. A session with no matching policy is never due: nothing is removed
without a policy.

When several policies match a session the most specific decides alone: a
named tenant before ``*``, then the one that names more labels, then the one
listed first. So a narrow policy can keep sessions a broad one would remove (a
policy with neither limit keeps what it matches).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from domain.errors import InvalidRequest, quoted

ANY_TENANT = "*"
SECONDS_PER_DAY = 86_400.0
# The longest limit a policy may set: a century. Longer ones (inf, 1e308) could
# not be subtracted from a date; leave the limit out for "never".
MAX_RETENTION_DAYS = 36_500


class RetentionAction(enum.Enum):
    ERASE = "erase"
    EXPORT_THEN_ERASE = "export-then-erase"


@dataclass(frozen=True)
class RetentionPolicy:
    """One entry of the policy file."""

    name: str
    tenant: str
    labels: Mapping[str, str] = field(default_factory=dict)
    # Days without an event, and days since the session started, after which it is
    # due; None: no such limit. Fractions of a day are allowed.
    idle_days: float | None = None
    max_age_days: float | None = None
    action: RetentionAction = RetentionAction.ERASE
    # Where export-then-erase writes its files (the adapter's business: a path).
    export_dir: str = ""

    def validate(self) -> None:
        where = f"retention policy {quoted(self.name)}"
        if not self.name:
            raise InvalidRequest("a retention policy needs a name, to say why a session went")
        if not self.tenant:
            raise InvalidRequest(f"{where}: name a tenant, or {ANY_TENANT!r} for every tenant")
        for limit, value in (("idle_days", self.idle_days), ("max_age_days", self.max_age_days)):
            if value is not None and not 0 <= value <= MAX_RETENTION_DAYS:
                raise InvalidRequest(
                    f"{where}: {limit} must be from 0 to {MAX_RETENTION_DAYS:,} (a century), "
                    f"not {value}"
                )
        if self.action is RetentionAction.EXPORT_THEN_ERASE and not self.export_dir:
            raise InvalidRequest(f"{where}: export-then-erase needs export_dir")
        if self.action is RetentionAction.ERASE and self.export_dir:
            raise InvalidRequest(
                f"{where}: export_dir is set but the action is erase; use export-then-erase "
                "to export first, or drop export_dir"
            )

    def matches(self, session: SessionFacts) -> bool:
        if self.tenant not in (ANY_TENANT, session.tenant):
            return False
        return all(session.labels.get(k) == v for k, v in self.labels.items())

    @property
    def specificity(self) -> tuple[int, int]:
        return (self.tenant != ANY_TENANT, len(self.labels))


@dataclass(frozen=True)
class SessionFacts:
    """What retention decides a session on, read from the store."""

    session_id: str
    tenant: str
    labels: Mapping[str, str]
    created: datetime
    last_event: datetime
    version: int
    erased: bool = False


@dataclass(frozen=True)
class Verdict:
    """A session's fate under the policies at one moment: due or not, and why."""

    session: SessionFacts
    # The policy that decides (None: no policy matches, so it stays).
    policy: RetentionPolicy | None
    due: bool
    reasons: tuple[str, ...]


def deciding_policy(
    session: SessionFacts, policies: Sequence[RetentionPolicy]
) -> RetentionPolicy | None:
    """The most specific matching policy (the first listed among equals), if any."""
    best: RetentionPolicy | None = None
    for policy in policies:
        if policy.matches(session) and (best is None or policy.specificity > best.specificity):
            best = policy
    return best


def judge(session: SessionFacts, policies: Sequence[RetentionPolicy], now: datetime) -> Verdict:
    """Whether ``session`` is due to go at ``now``, and the reasons it is (or stays)."""
    policy = deciding_policy(session, policies)
    if session.erased:
        return Verdict(session, policy, False, ("already erased",))
    if policy is None:
        return Verdict(session, None, False, ("no policy matches",))
    reasons = []
    idle = _days(now - session.last_event)
    age = _days(now - session.created)
    if policy.idle_days is not None and idle >= policy.idle_days:
        reasons.append(f"idle {idle:.1f} days >= {_limit(policy.idle_days)}")
    if policy.max_age_days is not None and age >= policy.max_age_days:
        reasons.append(f"age {age:.1f} days >= {_limit(policy.max_age_days)}")
    if reasons:
        return Verdict(session, policy, True, tuple(reasons))
    return Verdict(session, policy, False, (f"within policy {quoted(policy.name)}",))


def cutoffs(
    policies: Sequence[RetentionPolicy], now: datetime
) -> tuple[datetime | None, datetime | None]:
    """The latest last-event time and the latest start time a due session can have
    (None: no policy limits it so): a session newer on both counts is due under no
    policy, which narrows the search."""
    idle = [p.idle_days for p in policies if p.idle_days is not None]
    age = [p.max_age_days for p in policies if p.max_age_days is not None]
    idle_cut = now - timedelta(days=min(idle)) if idle else None
    age_cut = now - timedelta(days=min(age)) if age else None
    return idle_cut, age_cut


def check_policies(policies: Sequence[RetentionPolicy]) -> None:
    """Each policy valid, and names unique (a reason names its policy)."""
    seen: set[str] = set()
    for policy in policies:
        policy.validate()
        if policy.name in seen:
            raise InvalidRequest(f"two retention policies are named {quoted(policy.name)}")
        seen.add(policy.name)


def _days(delta: timedelta) -> float:
    return delta.total_seconds() / SECONDS_PER_DAY


def _limit(days: float) -> str:
    return f"{days:g}"
