"""`make stress` must fail when the store misbehaves: its checks, on streams built by hand."""

from __future__ import annotations

from collections import Counter

import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.stress.config import StressConfig
from tests.stress.faults import Moment
from tests.stress.readside import ReadSideChecks
from tests.stress.report import Run, judge
from tests.stress.verify import StoredAppend, Verdict, check_outcomes, check_stream
from tests.stress.workload import Outcome, turn_entries

SESSION = "s"


def started() -> pb.SessionEvent:
    return pb.SessionEvent(session_id=SESSION, version=1, started=pb.SessionStarted())


def appended(version: int, key: str, size: int, keep: int | None = None) -> pb.SessionEvent:
    entries = turn_entries(key, size)[:keep]
    for n, entry in enumerate(entries):
        entry.id = f"{key}-id{n}"
    return pb.SessionEvent(
        session_id=SESSION,
        version=version,
        entries_appended=pb.EntriesAppended(entries=entries, idempotency_key=key),
    )


def acknowledged(key: str, version: int, size: int) -> Outcome:
    ids = tuple(f"{key}-id{n}" for n in range(size))
    return Outcome(key, SESSION, size, "acknowledged", version=version, entry_ids=ids, at=1.0)


def check(events: list[pb.SessionEvent], outcomes: list[Outcome]) -> Verdict:
    verdict = Verdict()
    logged = [
        entry.id
        for e in events
        if e.HasField("entries_appended")
        for entry in e.entries_appended.entries
    ]
    appends = check_stream(SESSION, events, logged, max(e.version for e in events), verdict)
    stored: dict[str, list[StoredAppend]] = {}
    for append in appends:
        stored.setdefault(append.key, []).append(append)
    check_outcomes(outcomes, stored, verdict)
    return verdict


def test_a_stream_holding_every_acknowledged_append_once_passes() -> None:
    events = [started(), appended(2, "c0-a0", 2), appended(3, "c1-a0", 1)]
    outcomes = [acknowledged("c0-a0", 2, 2), acknowledged("c1-a0", 3, 1)]
    verdict = check(events, outcomes)
    assert verdict.failures == {}
    assert (verdict.events, verdict.entries) == (3, 3)


@pytest.mark.parametrize(
    ("events", "outcomes", "failure"),
    [
        ([started(), appended(2, "c0-a0", 1)], [acknowledged("c0-a1", 3, 1)], "lost"),
        (
            [started(), appended(2, "c0-a0", 1), appended(3, "c0-a0", 1)],
            [acknowledged("c0-a0", 2, 1)],
            "duplicated",
        ),
        ([started(), appended(3, "c0-a0", 1)], [acknowledged("c0-a0", 3, 1)], "gaps"),
        ([started(), appended(2, "c0-a0", 3, keep=2)], [acknowledged("c0-a0", 2, 3)], "partial"),
        ([started(), appended(2, "c0-a0", 1)], [acknowledged("c0-a0", 5, 1)], "misreported"),
        ([started(), appended(2, "c9-a9", 1)], [], "unexpected"),
        (
            [started(), appended(2, "c0-a0", 1)],
            [Outcome("c0-a0", SESSION, 1, "refused", refusal="ABORTED: no")],
            "unexpected",
        ),
    ],
)
def test_each_kind_of_damage_is_counted(
    events: list[pb.SessionEvent], outcomes: list[Outcome], failure: str
) -> None:
    assert failure in check(events, outcomes).failures


def test_a_durable_log_that_differs_from_the_events_is_counted() -> None:
    verdict = Verdict()
    check_stream(SESSION, [started(), appended(2, "c0-a0", 2)], ["c0-a0-id0"], 2, verdict)
    assert verdict.failures == {"log_mismatches": 1}


def run_with(
    outcomes: list[Outcome], codes: Counter[str], read_side: ReadSideChecks | None = None
) -> Run:
    config = StressConfig(
        seconds=100,
        servers=3,
        clients=32,
        client_processes=2,
        own_sessions_per_client=2,
        shared_sessions=4,
        shared_ratio=0.3,
        min_appends_per_second=50,
        drain_seconds=30,
        seed=1,
    )
    moments = [
        Moment(0.0, "load starts"),
        Moment(0.5, "database started", fault=True),
        Moment(2.0, "stop"),
    ]
    return Run(
        config, moments, outcomes, codes, 0, [], Verdict(), [], 1.0, read_side or ReadSideChecks()
    )


def test_a_run_that_stored_too_little_fails_though_nothing_was_lost() -> None:
    reasons = judge(run_with([acknowledged("c0-a0", 2, 1)], Counter(OK=1)))
    assert any("too little progress" in reason for reason in reasons)


def test_an_aborted_plain_append_fails_the_run() -> None:
    many = [acknowledged(f"c0-a{n}", n + 2, 1) for n in range(100_000)]
    assert judge(run_with(many, Counter(OK=100_000))) == []
    reasons = judge(run_with(many, Counter(OK=100_000, ABORTED=1)))
    assert reasons == ["statuses no append should answer: ABORTED 1"]


def test_a_read_side_that_did_not_hold_fails_the_run() -> None:
    many = [acknowledged(f"c0-a{n}", n + 2, 1) for n in range(100_000)]
    checks = ReadSideChecks(
        poison=["poison CreateSession accepted by 127.0.0.1:1"],
        shutdown=["waiting queries cut by SIGTERM answered ['DEADLINE_EXCEEDED']"],
        read_models=["read models quarantined 1 event(s): catalog #9: DataError"],
    )
    assert judge(run_with(many, Counter(OK=100_000), checks)) == checks.reasons()


def test_appends_after_the_last_fault_count_though_a_restart_came_later() -> None:
    """The SIGTERM fault is over when its server has exited; its restart, which may
    take until the load ends on a slow machine, is not a fault to serve after."""
    many = [acknowledged(f"c0-a{n}", n + 2, 1) for n in range(100_000)]
    run = run_with(many, Counter(OK=100_000))
    run.moments[-1:-1] = [Moment(1.9, "server 2 restarted and SERVING")]
    assert judge(run) == []
    run.moments[1] = Moment(1.5, "SIGTERM server 2: exited", fault=True)
    assert judge(run) == ["no append acknowledged after the last fault"]


def test_a_stream_reset_is_retried_but_any_other_cancel_fails_the_run() -> None:
    many = [acknowledged(f"c0-a{n}", n + 2, 1) for n in range(100_000)]
    reset = Counter({"OK": 100_000, "CANCELLED (stream reset)": 1})
    assert judge(run_with(many, reset)) == []
    reasons = judge(run_with(many, Counter(OK=100_000, CANCELLED=1)))
    assert reasons == ["statuses no append should answer: CANCELLED 1"]


def test_a_cancel_is_expected_only_at_a_servers_stop() -> None:
    """gRPC's stop answers CANCELLED for a call still running when a SIGTERMed server
    ends; the append is retried. A CANCELLED anywhere else still fails the run."""
    many = [acknowledged(f"c0-a{n}", n + 2, 1) for n in range(100_000)]
    run = run_with(many, Counter(OK=100_000, CANCELLED=1))
    run.moments[1:1] = [Moment(0.3, "SIGTERM server 2: exited in 0.2 s", fault=True)]
    run.cancelled_at = [0.15]
    assert judge(run) == []
    run.cancelled_at = [50.0]
    assert judge(run) == ["statuses no append should answer: CANCELLED 1"]
