"""`sessionstore retention plan|apply` on both databases, with no server or worker
running: the plan lists what would go and why and erases nothing, apply erases it
and says so, a policy file with a mistake is refused whole, and a removal that fails
exits 1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from services.app.sessions import SessionService
from services.bootstrap import build_service
from services.cli import cli
from services.config import Config
from services.readmodels.admin import migrate_database
from tests.support.old_sessions import import_old_session

NOW = datetime.now(UTC).replace(microsecond=0)
POLICY = """
[[retention]]
name = "chat-idle"
tenant = "acme"
labels = { app = "chat" }
idle_days = 30
"""


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


@pytest.fixture
def sessions(database_url: str) -> Iterator[SessionService]:
    # Migrated, as a store its servers (or its deploy's migration job) have started:
    # a plan only reads, and refuses tables not migrated.
    migrate_database(database_url)
    service = build_service(Config(database_url=database_url, projections="off"))
    import_old_session(service, "acme/idle", [days_ago(90), days_ago(40)], {"app": "chat"})
    import_old_session(service, "acme/active", [days_ago(90), days_ago(20)], {"app": "chat"})
    import_old_session(service, "acme/other", [days_ago(900), days_ago(800)], {"app": "x"})
    yield service
    service.close()


def run(database_url: str, policy: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["retention", *args, "--policy-file", str(policy), "--database-url", database_url]
    )
    return result.exit_code, result.output


def test_plan_lists_what_would_go_then_apply_erases_it(
    database_url: str, sessions: SessionService, tmp_path: Path
) -> None:
    policy = tmp_path / "retention.toml"
    policy.write_text(POLICY)

    code, text = run(database_url, policy, "plan")
    assert code == 0, text
    assert text.splitlines()[0].endswith(": 1 session")
    assert text.splitlines()[1:] == [
        "  acme/idle  policy chat-idle (erase): idle 40.0 days >= 30",
    ]
    assert not sessions.aggregate("acme/idle").erased
    # As of a later date, the active one too; as JSON for scripts.
    later = (NOW + timedelta(days=15)).isoformat()
    code, text = run(database_url, policy, "plan", "--at", later, "--json")
    assert code == 0, text
    planned = json.loads(text)
    assert [r["session_id"] for r in planned["removals"]] == ["acme/idle", "acme/active"]
    assert planned["removals"][1]["reasons"] == ["idle 35.0 days >= 30"]
    assert not sessions.aggregate("acme/active").erased

    code, text = run(database_url, policy, "apply")
    assert code == 0, text
    assert "erased 1 session, wrote 0 exports, left 0 for a later run, 0 failed" in text
    assert sessions.aggregate("acme/idle").erased
    assert not sessions.aggregate("acme/active").erased
    assert not sessions.aggregate("acme/other").erased
    # Nothing left to do.
    code, text = run(database_url, policy, "apply", "--json")
    assert code == 0 and json.loads(text)["erased"] == []


def test_a_mistake_in_the_file_or_a_failed_removal_is_said_and_exits_1(
    database_url: str, sessions: SessionService, tmp_path: Path
) -> None:
    policy = tmp_path / "retention.toml"
    policy.write_text(POLICY.replace("idle_days", "idle_dayz"))
    code, text = run(database_url, policy, "apply")
    assert code == 1 and "unknown key 'idle_dayz'" in text
    assert not sessions.aggregate("acme/idle").erased

    blocked = tmp_path / "blocked"
    blocked.write_text("not a directory")
    policy.write_text(
        POLICY.replace(
            "idle_days", f'action = "export-then-erase"\nexport_dir = "{blocked}"\nidle_days'
        )
    )
    code, text = run(database_url, policy, "apply")
    assert code == 1 and "FAILED acme/idle: export failed, nothing erased" in text
    assert not sessions.aggregate("acme/idle").erased


@pytest.mark.parametrize("limit", ["idle_days = inf", "max_age_days = 1e308", "idle_days = 36501"])
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_a_limit_beyond_a_century_is_refused_naming_the_bound(
    database_url: str, sessions: SessionService, tmp_path: Path, limit: str, command: str
) -> None:
    """inf and 1e308 passed the check, then could not be subtracted from a date."""
    policy = tmp_path / "retention.toml"
    policy.write_text(POLICY.replace("idle_days = 30", limit))
    code, text = run(database_url, policy, command)
    assert code == 1, text
    assert "must be from 0 to 36,500 days (a century)" in text
    assert "Traceback" not in text
    assert not sessions.aggregate("acme/idle").erased
