"""Retention on both databases: the dry run lists exactly the sessions the policies
make due (by tenant, label, idle time and age) and why, and removes nothing; apply
erases them as EraseSession does (keys deleted, summaries and forks with them),
exports first when asked (and erases nothing when the export fails), leaves every
session no policy makes due alone, and never erases a session written after the plan.

The sessions are imported pi files whose records carry past times, and retention's
clock is set to a fixed "now" after them: no component is stood in for."""

from __future__ import annotations

import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from domain.errors import VersionConflict
from domain.retention import RetentionPolicy
from services.adapters.retention_file import parse_policies
from services.app import tenancy
from services.app.retention import RetentionOutcome, RetentionService
from services.app.retention_scheduler import RetentionScheduler
from services.app.sessions import SessionService
from services.bootstrap import Application, build_application, build_retention
from services.config import Config
from tests.support.old_sessions import import_old_session
from tests.support.raw_keys import raw_key_rows
from tests.unit.support import user

# Retention's "now": the time the tests run, so that a write made during a test is
# recent, and imported records days before it are old.
NOW = datetime.now(UTC).replace(microsecond=0)
ACME = tenancy.Principal("acme-agent", "acme", tenancy.Role.TENANT)


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def policies(text: str) -> list[RetentionPolicy]:
    return parse_policies(tomllib.loads(text))


# acme's chat sessions go after 30 idle days, unless on legal hold; acme's other
# sessions after a year. No other tenant has a policy.
ACME_POLICIES = """
[[retention]]
name = "chat-idle"
tenant = "acme"
labels = { app = "chat" }
idle_days = 30

[[retention]]
name = "legal-hold"
tenant = "acme"
labels = { app = "chat", hold = "legal" }

[[retention]]
name = "acme-year"
tenant = "acme"
max_age_days = 365
"""


@dataclass
class Store:
    app: Application
    retention: RetentionService
    database_url: str

    @property
    def sessions(self) -> SessionService:
        return self.app.sessions

    def caught_up(self) -> None:
        assert self.app.read_models is not None
        self.app.read_models.wait_for(["catalog"], 0, None)

    def readable(self, stream: str) -> str:
        """Everything the store answers of the session's content, as text."""
        return repr(self.sessions.events_upto(stream, None)) + repr(
            self.sessions.durable_log(stream)
        )


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    app = build_application(Config(database_url=database_url))
    assert app.read_models is not None
    app.read_models.start()  # the catalog, kept in this process as a server keeps it
    yield Store(app, build_retention(app.sessions, app.read_models, lambda: NOW), database_url)
    app.close()


@pytest.fixture
def acme(store: Store) -> Store:
    """Sessions of acme, of another tenant and of the default tenant, with pasts."""
    old = import_old_session
    s = store.sessions
    # Due: idle 40 days (a summary in it); a year and more old.
    old(s, "acme/idle", [days_ago(200), days_ago(40)], {"app": "chat"}, summary_at=1)
    old(s, "acme/old", [days_ago(400), days_ago(1)], {"app": "support"})
    # Not due: active 5 days ago; on legal hold (the narrower policy decides).
    old(s, "acme/active", [days_ago(200), days_ago(5)], {"app": "chat"})
    old(s, "acme/held", [days_ago(400), days_ago(300)], {"app": "chat", "hold": "legal"})
    # No policy: another tenant's idle chat, and an ancient session of the default tenant.
    old(s, "globex/idle", [days_ago(200), days_ago(40)], {"app": "chat"})
    old(s, "ancient", [days_ago(2000), days_ago(1500)])
    store.caught_up()
    return store


ALL = ("acme/idle", "acme/old", "acme/active", "acme/held", "globex/idle", "ancient")


def test_the_dry_run_lists_exactly_the_due_sessions_and_why_and_removes_nothing(
    acme: Store,
) -> None:
    before = {s: (acme.sessions.aggregate(s).version, acme.readable(s)) for s in ALL}
    plan = acme.retention.plan(policies(ACME_POLICIES))

    listed = {
        r.session_id: (r.verdict.policy and r.verdict.policy.name, r.verdict.reasons)
        for r in plan.removals
    }
    assert listed == {
        "acme/idle": ("chat-idle", ("idle 40.0 days >= 30",)),
        "acme/old": ("acme-year", ("age 400.0 days >= 365",)),
    }
    assert plan.held == () and plan.session_count == 2
    # Removed nothing: every session as it was, content readable.
    after = {s: (acme.sessions.aggregate(s).version, acme.readable(s)) for s in ALL}
    assert after == before
    assert all("secret" in text for _, text in after.values())
    # Later, more is due: the active chat, past 30 idle days.
    later = acme.retention.plan(policies(ACME_POLICIES), at=NOW + timedelta(days=26))
    assert {r.session_id for r in later.removals} == {"acme/idle", "acme/old", "acme/active"}


def test_without_a_policy_nothing_is_planned(acme: Store) -> None:
    assert acme.retention.plan([]).removals == ()
    other = policies('[[retention]]\nname = "x"\ntenant = "initech"\nidle_days = 0\n')
    assert acme.retention.plan(other).removals == ()
    # A policy for every tenant reaches them all, the default tenant's too.
    every = policies('[[retention]]\nname = "all"\ntenant = "*"\nidle_days = 1000\n')
    assert [r.session_id for r in acme.retention.plan(every).removals] == ["ancient"]


def test_apply_erases_them_as_erasure_does_and_leaves_the_rest(acme: Store) -> None:
    rules = policies(ACME_POLICIES)
    outcome = acme.retention.apply(acme.retention.plan(rules), rules)

    assert sorted(outcome.erased) == ["acme/idle", "acme/old"]
    assert outcome.skipped == [] and outcome.failed == [] and outcome.exported == []
    for stream in ("acme/idle", "acme/old"):
        session = acme.sessions.aggregate(stream)
        assert session.erased
        # Content, summary included, unreadable; its keys deleted from the database.
        assert "secret" not in acme.readable(stream)
        assert raw_key_rows(acme.database_url, stream) == []
        (erasure,) = acme.sessions.history(stream).erasures()
        assert erasure.whole_session and erasure.erased_by == "retention"
    (idle_erasure,) = acme.sessions.history("acme/idle").erasures()
    assert idle_erasure.reason == "retention policy 'chat-idle': idle 40.0 days >= 30"
    for stream in ("acme/active", "acme/held", "globex/idle", "ancient"):
        assert not acme.sessions.aggregate(stream).erased
        assert "secret" in acme.readable(stream)
        assert raw_key_rows(acme.database_url, stream) != []
    # The catalog follows: an erased session is no longer a candidate.
    acme.caught_up()
    assert acme.retention.plan(rules).removals == ()


def test_forks_go_with_their_parent_only_when_due_themselves(store: Store) -> None:
    s = store.sessions
    rules = policies(ACME_POLICIES)
    # A pi tree: the branch becomes a fork, idle 35 days, as due as its parent.
    tree = import_old_session(
        s, "acme/tree", [days_ago(200), days_ago(40)], {"app": "chat"}, branch_at=days_ago(35)
    )
    fork_id = tree.sessions[1].session.id
    # Another whose fork was erased by hand before: it goes alone, the fork not counted.
    erased_before = (
        import_old_session(
            s, "acme/tree2", [days_ago(200), days_ago(40)], {"app": "chat"}, branch_at=days_ago(35)
        )
        .sessions[1]
        .session.id
    )
    s.erase_session(erased_before, erased_by="dpo", reason="asked")
    # A parent whose fork (made now, by acme) is in use: erasing it would erase the fork.
    # (A fork copies its parent's events with their times: its own write makes it recent.)
    import_old_session(s, "acme/forked", [days_ago(200), days_ago(40)], {"app": "chat"})
    with tenancy.calling_as(ACME):
        s.fork_session("acme/forked", new_session_id="acme/busy")
        s.append("acme/busy", [user("a new question on the fork")])
    store.caught_up()

    plan = store.retention.plan(rules)
    removal, alone = plan.removals
    assert removal.session_id == "acme/tree"
    assert [f.session.session_id for f in removal.forks] == [fork_id]
    assert alone.session_id == "acme/tree2" and alone.forks == ()
    (held,) = plan.held
    assert held.verdict.session.session_id == "acme/forked"
    assert "fork acme/busy" in held.why and "not due" in held.why

    outcome = store.retention.apply(plan, rules)
    assert outcome.erased == ["acme/tree", fork_id, "acme/tree2"]
    (fork_erasure,) = s.history(fork_id).erasures()
    assert fork_erasure.erased_with == "acme/tree"
    assert "secret" not in store.readable(fork_id)
    assert raw_key_rows(store.database_url, fork_id) == []
    for kept in ("acme/forked", "acme/busy"):
        assert not s.aggregate(kept).erased and "secret" in store.readable(kept)


def test_the_plan_is_the_same_however_many_sessions_one_read_judges(acme: Store) -> None:
    # Candidates are judged a batch per read of the store: a batch that ends between a
    # session and its fork, or after a single session, changes nothing in the plan.
    s = acme.sessions
    import_old_session(
        s, "acme/tree", [days_ago(200), days_ago(40)], {"app": "chat"}, branch_at=days_ago(35)
    )
    import_old_session(s, "acme/forked", [days_ago(200), days_ago(40)], {"app": "chat"})
    # Due with its fork, but the fork's own fork is in use: held back two generations down.
    deep = import_old_session(
        s, "acme/deep", [days_ago(200), days_ago(40)], {"app": "chat"}, branch_at=days_ago(35)
    )
    with tenancy.calling_as(ACME):
        s.fork_session("acme/forked", new_session_id="acme/busy")
        s.append("acme/busy", [user("a new question on the fork")])
        s.fork_session(deep.sessions[1].session.id, new_session_id="acme/grandchild")
        s.append("acme/grandchild", [user("a new question two forks down")])
    acme.caught_up()
    rules = policies(ACME_POLICIES)

    def planned(retention: RetentionService) -> tuple[list[tuple[str, list[str]]], list[str]]:
        plan = retention.plan(rules)
        removals = [(r.session_id, [f.session.session_id for f in r.forks]) for r in plan.removals]
        return removals, [h.verdict.session.session_id for h in plan.held]

    whole = planned(acme.retention)
    assert [r for r, _ in whole[0]] == ["acme/idle", "acme/old", "acme/tree"]
    assert len(whole[0][2][1]) == 1
    assert whole[1] == ["acme/forked", "acme/deep", deep.sessions[1].session.id]
    catalog = acme.retention.catalog
    for batch in (1, 2, 3):
        assert planned(RetentionService(s, catalog, lambda: NOW, batch=batch)) == whole


def test_a_session_written_after_the_plan_is_not_erased(acme: Store) -> None:
    rules = policies(ACME_POLICIES)
    plan = acme.retention.plan(rules)
    version = acme.sessions.aggregate("acme/idle").version
    acme.sessions.append("acme/idle", [user("still here")])

    outcome = acme.retention.apply(plan, rules)
    assert outcome.erased == ["acme/old"]
    assert outcome.skipped == [
        (
            "acme/idle",
            f"acme/idle was written since the plan (version {version} then, {version + 1} now)",
        )
    ]
    assert not acme.sessions.aggregate("acme/idle").erased
    assert "secret" in acme.readable("acme/idle")
    # And the next plan, made after the write, sees it active.
    acme.caught_up()
    assert acme.retention.plan(rules).removals == ()


def export_policies(export_dir: Path) -> list[RetentionPolicy]:
    return policies(
        f"""
[[retention]]
name = "chat-export"
tenant = "acme"
labels = {{ app = "chat" }}
idle_days = 30
action = "export-then-erase"
export_dir = "{export_dir}"

[[retention]]
name = "legal-hold"
tenant = "acme"
labels = {{ app = "chat", hold = "legal" }}
"""
    )


def test_export_then_erase_writes_the_export_first(acme: Store, tmp_path: Path) -> None:
    rules = export_policies(tmp_path / "exports")
    outcome = acme.retention.apply(acme.retention.plan(rules), rules)

    exported = tmp_path / "exports" / "acme" / "idle.jsonl"
    assert outcome.exported == [exported] and outcome.erased == ["acme/idle"]
    # The file holds the session as it was before its erasure, as `export` writes it.
    text = exported.read_text()
    assert "secret question 1" in text and "secret summary of the early turns" in text
    assert text.splitlines()[0].startswith('{"type":"session"')
    assert acme.sessions.aggregate("acme/idle").erased
    assert "secret" not in acme.readable("acme/idle")
    assert [p.name for p in exported.parent.iterdir()] == ["idle.jsonl"]  # no partial file


def test_a_failed_export_erases_nothing(acme: Store, tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the export directory should be")
    rules = export_policies(blocked)
    outcome = acme.retention.apply(acme.retention.plan(rules), rules)

    assert outcome.erased == [] and outcome.exported == []
    ((session_id, why),) = outcome.failed
    assert session_id == "acme/idle" and why.startswith("export failed, nothing erased")
    assert not acme.sessions.aggregate("acme/idle").erased
    assert "secret" in acme.readable("acme/idle")


def test_a_session_forked_after_the_plan_is_not_erased(acme: Store) -> None:
    rules = policies(ACME_POLICIES)
    plan = acme.retention.plan(rules)
    with tenancy.calling_as(ACME):
        acme.sessions.fork_session("acme/idle", new_session_id="acme/copy")

    outcome = acme.retention.apply(plan, rules)
    assert outcome.erased == ["acme/old"]
    assert outcome.skipped == [("acme/idle", "acme/idle was forked since the plan")]
    assert not acme.sessions.aggregate("acme/copy").erased
    assert "secret" in acme.readable("acme/idle") and "secret" in acme.readable("acme/copy")


def test_the_erasure_is_saved_only_at_the_planned_version(store: Store) -> None:
    # What closes the gap between apply's last check and the erasure's save.
    s = store.sessions
    s.create_session("acme/s", lambda d: d)
    s.append("acme/s", [user("secret words")])
    with pytest.raises(VersionConflict):
        s.erase_session("acme/s", erased_by="retention", reason="r", expected_version=1)
    assert not s.aggregate("acme/s").erased and "secret" in store.readable("acme/s")
    s.erase_session("acme/s", erased_by="retention", reason="r", expected_version=2)
    assert s.aggregate("acme/s").erased


def test_the_scheduler_counts_what_went_and_runs_only_while_leading(
    acme: Store, tmp_path: Path
) -> None:
    policy_file = tmp_path / "retention.toml"
    policy_file.write_text(ACME_POLICIES)
    leading = threading.Event()
    scheduler = RetentionScheduler(acme.retention, policy_file, 0.05, leading)
    seen: list[RetentionOutcome] = []
    scheduler.on_run.append(seen.append)
    stopping = threading.Event()
    running = threading.Thread(target=scheduler.run, args=(stopping,))
    running.start()
    try:
        time.sleep(0.5)
        assert scheduler.counters.runs == 0  # not leading: nothing applied
        assert not acme.sessions.aggregate("acme/idle").erased
        leading.set()
        give_up_at = time.monotonic() + 30
        while scheduler.counters.runs < 2 and time.monotonic() < give_up_at:
            time.sleep(0.05)
    finally:
        stopping.set()
        running.join()
    counters = scheduler.counters
    assert (counters.erased, counters.failed, counters.failed_runs) == (2, 0, 0)
    assert counters.runs >= 2 and len(seen) == counters.runs
    assert sorted(seen[0].erased) == ["acme/idle", "acme/old"] and seen[1].erased == []
    # A file that cannot be read applies nothing, and is counted.
    policy_file.write_text("[[retention]]\n")
    assert scheduler.run_once() is None and scheduler.counters.failed_runs == 1
