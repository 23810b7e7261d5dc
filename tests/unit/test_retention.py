"""Retention's rules and its policy file: which policy decides, what makes a session
due, and a file with a mistake refused whole, saying what to fix."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from domain.retention import RetentionAction, SessionFacts, cutoffs, deciding_policy, judge
from services.adapters.retention_file import RetentionFileError, parse_policies, read_policies
from tests.support.manifests import KUBERNETES, OVERLAYS, environment, find, pod_spec, render

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def facts(
    tenant: str = "acme", labels: dict[str, str] | None = None, idle: float = 0, age: float = 0
) -> SessionFacts:
    return SessionFacts(
        session_id=f"{tenant}/s",
        tenant=tenant,
        labels=labels or {},
        created=NOW - timedelta(days=age),
        last_event=NOW - timedelta(days=idle),
        version=3,
    )


POLICIES = parse_policies(
    tomllib.loads(
        """
[[retention]]
name = "everyone"
tenant = "*"
max_age_days = 365

[[retention]]
name = "acme"
tenant = "acme"
idle_days = 30

[[retention]]
name = "acme-chat"
tenant = "acme"
labels = { app = "chat" }
idle_days = 7
action = "export-then-erase"
export_dir = "/exports"

[[retention]]
name = "acme-chat-hold"
tenant = "acme"
labels = { app = "chat", hold = "legal" }
"""
    )
)


def test_the_most_specific_matching_policy_decides() -> None:
    def name(session: SessionFacts) -> str | None:
        policy = deciding_policy(session, POLICIES)
        return policy.name if policy else None

    assert name(facts("globex")) == "everyone"
    assert name(facts("acme")) == "acme"
    assert name(facts("acme", {"app": "chat", "team": "x"})) == "acme-chat"
    assert name(facts("acme", {"app": "chat", "hold": "legal"})) == "acme-chat-hold"
    assert name(facts("acme", {"app": "support"})) == "acme"
    assert deciding_policy(facts("globex"), POLICIES[1:]) is None


def test_a_session_is_due_past_either_limit_and_says_which() -> None:
    assert judge(facts("acme", idle=30), POLICIES, NOW).reasons == ("idle 30.0 days >= 30",)
    assert not judge(facts("acme", idle=29.9), POLICIES, NOW).due
    both = judge(facts("globex", idle=500, age=400), POLICIES, NOW)
    assert both.due and both.reasons == ("age 400.0 days >= 365",)
    # The narrower policy keeps what a broader one would remove.
    held = judge(facts("acme", {"app": "chat", "hold": "legal"}, idle=900, age=900), POLICIES, NOW)
    assert not held.due and held.reasons == ("within policy 'acme-chat-hold'",)
    assert judge(facts("globex", idle=900, age=900), [], NOW).reasons == ("no policy matches",)
    chat = judge(facts("acme", {"app": "chat"}, idle=8), POLICIES, NOW)
    assert chat.due and chat.policy is not None
    assert chat.policy.action is RetentionAction.EXPORT_THEN_ERASE


def test_the_search_is_narrowed_by_the_loosest_limits() -> None:
    assert cutoffs(POLICIES, NOW) == (NOW - timedelta(days=7), NOW - timedelta(days=365))
    assert cutoffs(POLICIES[3:], NOW) == (None, None)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ('tenant = "a"\nidle_days = 1', "name must be"),
        ('name = "x"\nidle_days = 1', "tenant must be"),
        ('name = "x"\ntenant = "a"\nidle_day = 1', "unknown key 'idle_day'"),
        ('name = "x"\ntenant = "a"\nidle_days = -1', "idle_days must be from 0 to 36,500 days"),
        ('name = "x"\ntenant = "a"\nmax_age_days = "30"', "max_age_days must be a number"),
        ('name = "x"\ntenant = "a"\naction = "delete"', "action must be 'erase' or"),
        ('name = "x"\ntenant = "a"\naction = "export-then-erase"', "needs export_dir"),
        ('name = "x"\ntenant = "a"\nexport_dir = "/e"', "action is erase"),
        ('name = "x"\ntenant = "a"\nlabels = { app = 1 }', "labels must be a table of strings"),
    ],
)
def test_a_policy_with_a_mistake_is_refused_saying_what_to_fix(entry: str, says: str) -> None:
    with pytest.raises(RetentionFileError, match="#1") as refused:
        parse_policies(tomllib.loads(f"[[retention]]\n{entry}\n"))
    assert says in str(refused.value)


def test_a_file_is_refused_whole(tmp_path: Path) -> None:
    twice = tmp_path / "twice.toml"
    twice.write_text('[[retention]]\nname = "x"\ntenant = "a"\n' * 2)
    with pytest.raises(RetentionFileError, match="two retention policies are named 'x'"):
        read_policies(twice)
    with pytest.raises(RetentionFileError, match="not TOML"):
        (tmp_path / "bad.toml").write_text("[[retention]\n")
        read_policies(tmp_path / "bad.toml")
    with pytest.raises(RetentionFileError, match="No such file"):
        read_policies(tmp_path / "missing.toml")
    with pytest.raises(RetentionFileError, match="unknown table 'policy'"):
        parse_policies({"policy": []})
    # An empty file is valid, and removes nothing.
    (tmp_path / "empty.toml").write_text("")
    assert read_policies(tmp_path / "empty.toml") == []


def test_the_readme_example_is_a_valid_policy_file() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme[readme.index("## Retention") :]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    chat, hold = parse_policies(tomllib.loads(example))
    assert (chat.name, chat.idle_days, chat.max_age_days) == ("chat-idle", 30, 365)
    assert deciding_policy(facts("acme", {"app": "chat", "hold": "legal"}), [chat, hold]) == hold


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_deployed_worker_reads_the_shipped_policy_file_which_removes_nothing(
    overlay: str,
) -> None:
    objects = render(KUBERNETES / "overlays" / overlay)
    spec = pod_spec(find(objects, "Deployment", "sessionstore-worker"))
    (worker,) = spec["containers"]
    policy_file = Path(environment(objects, worker)["SESSIONSTORE_RETENTION_FILE"])
    (mount,) = [m for m in worker["volumeMounts"] if m["mountPath"] == str(policy_file.parent)]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    config_map = find(objects, "ConfigMap", volume["configMap"]["name"])
    shipped = config_map["data"][policy_file.name]
    assert parse_policies(tomllib.loads(shipped)) == []
