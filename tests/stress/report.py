"""What the run did, printed, and whether it passed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tests.stress.config import StressConfig
from tests.stress.faults import Moment
from tests.stress.readside import ReadSideChecks
from tests.stress.verify import Verdict
from tests.stress.workload import Outcome

# Answers a client may get and retry; anything else fails the run (above all
# ABORTED, which a plain append must never answer).
# The moments that stop a server, recorded once it has gone: a CANCELLED within
# this many seconds before one (a SIGTERM's stop takes up to its grace period),
# or just after, came from that stop.
SERVER_STOPS = ("SIGKILL", "SIGTERM")
BEFORE_STOP = 12.0
AFTER_STOP = 3.0
EXPECTED_CODES = frozenset({"OK", "UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED (stream reset)"})


@dataclass
class Run:
    config: StressConfig
    moments: list[Moment]
    outcomes: list[Outcome]
    codes: Counter[str]
    # Acknowledged appends sent again on purpose, and those not answered as replays.
    resends: int
    resend_failures: list[str]
    verdict: Verdict
    # Servers that exited without being asked to, with how.
    crashed: list[str]
    total_seconds: float
    read_side: ReadSideChecks
    # The first details of each status other than OK, with its wall-clock time.
    odd_answers: dict[str, str] = field(default_factory=dict)
    # When each plain CANCELLED came (time.time()).
    cancelled_at: list[float] = field(default_factory=list)


def judge(run: Run) -> list[str]:
    """Why the run failed; empty when it passed."""
    reasons = [f"{name}: {count}" for name, count in run.verdict.failures.items()]
    unexpected = {code: n for code, n in run.codes.items() if code not in EXPECTED_CODES}
    # gRPC's stop answers CANCELLED for a call still running as the server ends:
    # expected there, a refusal anywhere else.
    stops = [m.at for m in run.moments if m.what.startswith(SERVER_STOPS)]
    if run.cancelled_at and all(
        any(-AFTER_STOP <= stop - at <= BEFORE_STOP for stop in stops) for at in run.cancelled_at
    ):
        unexpected.pop("CANCELLED", None)
    if unexpected:
        reasons.append(f"statuses no append should answer: {_codes(Counter(unexpected))}")
    states = Counter(outcome.state for outcome in run.outcomes)
    if states["refused"]:
        reasons.append(f"{states['refused']} append(s) refused")
    if states["unresolved"]:
        reasons.append(
            f"{states['unresolved']} append(s) still unanswered "
            f"{run.config.drain_seconds:g} s after the load ended"
        )
    acknowledged = states["acknowledged"]
    least = run.config.min_appends_per_second * run.config.seconds
    if acknowledged < least:
        reasons.append(
            f"too little progress: {acknowledged} appends acknowledged, at least {least:.0f} "
            f"needed ({run.config.min_appends_per_second:g}/s)"
        )
    last_fault = max(moment.at for moment in run.moments if moment.fault)
    if not _acknowledged_between(run.outcomes, last_fault, run.moments[-1].at):
        reasons.append("no append acknowledged after the last fault")
    if run.resend_failures:
        reasons.append(f"{len(run.resend_failures)} resent append(s) not answered as a replay")
    reasons.extend(f"server exited unasked: {how}" for how in run.crashed)
    reasons.extend(run.read_side.reasons())
    return reasons


def render(run: Run, reasons: list[str]) -> str:
    config, verdict = run.config, run.verdict
    start = run.moments[0].at
    acknowledged = [o for o in run.outcomes if o.state == "acknowledged"]
    lines = [
        "",
        f"stress: {config.seconds:g} s of load, {config.servers} servers, {config.clients} "
        f"clients in {config.client_processes} processes, {verdict.sessions} sessions",
        f"  appends acknowledged: {len(acknowledged):,} of {len(run.outcomes):,} sent "
        f"({sum(o.replayed for o in acknowledged):,} answered as a replay of an earlier "
        f"attempt); {sum(o.size for o in acknowledged):,} entries",
        f"  appends/s: {len(acknowledged) / config.seconds:,.0f} over the whole load",
        "  by stretch:",
    ]
    for begin, end in zip(run.moments, run.moments[1:], strict=False):
        count = _acknowledged_between(run.outcomes, begin.at, end.at)
        seconds = max(end.at - begin.at, 1e-9)
        lines.append(
            f"    +{begin.at - start:5.1f} s .. +{end.at - start:5.1f} s  "
            f"{count / seconds:7,.0f}/s  after: {begin.what}"
        )
    retried = [o.attempts for o in run.outcomes if o.attempts > 1]
    lines += [
        f"  status codes seen: {_codes(run.codes)}",
        *(f"    first {code}: {details}" for code, details in sorted(run.odd_answers.items())),
        f"  appends retried: {len(retried):,} (most attempts for one: {max(retried, default=1)})",
        f"  acknowledged appends resent on purpose: {run.resends:,}, answered as a replay "
        f"of the first: {run.resends - len(run.resend_failures):,}",
        f"  read back: {verdict.events:,} events, {verdict.entries:,} entries",
        f"  lost {verdict.lost}, duplicated {verdict.duplicated}, gaps {verdict.gaps}, "
        f"partial {verdict.partial}, misreported {verdict.misreported}, "
        f"unexpected {verdict.unexpected}, durable log mismatches {verdict.log_mismatches}, "
        f"events table mismatches {verdict.table_mismatches}",
        f"  poison requests refused by every server: {'no' if run.read_side.poison else 'yes'}; "
        f"SIGTERM with waiting queries: exited in {run.read_side.sigterm_exit_seconds:.1f} s; "
        f"read models caught up, nothing quarantined: "
        f"{'no' if run.read_side.read_models else 'yes'}",
        f"  total time: {run.total_seconds:.0f} s (cluster, servers, load, drain, read-back)",
    ]
    lines += [f"  ! {problem}" for problem in verdict.problems]
    lines += [f"  ! {failure}" for failure in run.resend_failures[:10]]
    if reasons:
        lines.append("FAILED: " + "; ".join(reasons))
    else:
        lines.append("PASSED: every acknowledged append stored once, whole, without gaps")
    return "\n".join(lines)


def _acknowledged_between(outcomes: list[Outcome], begin: float, end: float) -> int:
    return sum(1 for o in outcomes if o.state == "acknowledged" and begin <= o.at < end)


def _codes(codes: Counter[str]) -> str:
    return ", ".join(f"{code} {count:,}" for code, count in codes.most_common())
