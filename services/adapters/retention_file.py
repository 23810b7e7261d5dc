"""The retention policy file (``SESSIONSTORE_RETENTION_FILE``), TOML::

    [[retention]]
    name = "chat-idle"                  # named in every erasure it causes
    tenant = "acme"                     # or "*" for every tenant
    labels = { app = "chat" }           # every one must match; leave out for all sessions
    idle_days = 30                      # no event for 30 days
    max_age_days = 365                  # or started over a year ago
    action = "export-then-erase"        # or "erase" (the default)
    export_dir = "/var/lib/sessionstore/exports"

    [[retention]]                       # a policy with no limit keeps what it matches
    name = "keep-legal-holds"
    tenant = "acme"
    labels = { hold = "legal" }

A file with no ``[[retention]]`` entry removes nothing. The file is read whole
and checked before anything is applied: one mistake refuses it all, saying
which entry and what to fix.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from domain.errors import InvalidRequest
from domain.retention import MAX_RETENTION_DAYS, RetentionAction, RetentionPolicy, check_policies

_FIELDS = {"name", "tenant", "labels", "idle_days", "max_age_days", "action", "export_dir"}


class RetentionFileError(ValueError):
    """The policy file cannot be read as one: nothing is applied."""


def read_policies(path: Path) -> list[RetentionPolicy]:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as error:
        raise RetentionFileError(f"retention file {path}: {error.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise RetentionFileError(f"retention file {path} is not TOML: {error}") from None
    return parse_policies(data, str(path))


def parse_policies(data: dict[str, Any], source: str = "retention file") -> list[RetentionPolicy]:
    unknown = set(data) - {"retention"}
    if unknown:
        raise RetentionFileError(
            f"{source}: unknown table {sorted(unknown)[0]!r}; policies are [[retention]] entries"
        )
    entries = data.get("retention", [])
    if not isinstance(entries, list):
        raise RetentionFileError(f"{source}: write each policy as a [[retention]] entry")
    policies = [
        _policy(entry, f"{source}: [[retention]] #{n}") for n, entry in enumerate(entries, 1)
    ]
    try:
        check_policies(policies)
    except InvalidRequest as error:
        raise RetentionFileError(f"{source}: {error}") from None
    return policies


def _policy(entry: Any, where: str) -> RetentionPolicy:
    if not isinstance(entry, dict):
        raise RetentionFileError(f"{where} is not a table")
    unknown = set(entry) - _FIELDS
    if unknown:
        raise RetentionFileError(
            f"{where}: unknown key {sorted(unknown)[0]!r}; known: {', '.join(sorted(_FIELDS))}"
        )
    labels = entry.get("labels", {})
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise RetentionFileError(f'{where}: labels must be a table of strings, e.g. {{app = "x"}}')
    try:
        action = RetentionAction(entry.get("action", RetentionAction.ERASE.value))
    except ValueError:
        choices = " or ".join(repr(a.value) for a in RetentionAction)
        raise RetentionFileError(f"{where}: action must be {choices}") from None
    policy = RetentionPolicy(
        name=_text(entry, "name", where),
        tenant=_text(entry, "tenant", where),
        labels=dict(labels),
        idle_days=_days(entry, "idle_days", where),
        max_age_days=_days(entry, "max_age_days", where),
        action=action,
        export_dir=_text(entry, "export_dir", where, required=False),
    )
    try:
        policy.validate()
    except InvalidRequest as error:
        raise RetentionFileError(f"{where}: {error}") from None
    return policy


def _text(entry: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str) or (required and not value):
        raise RetentionFileError(f"{where}: {key} must be a non-empty string")
    return value


def _days(entry: dict[str, Any], key: str, where: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RetentionFileError(f"{where}: {key} must be a number of days")
    if not 0 <= value <= MAX_RETENTION_DAYS:
        raise RetentionFileError(
            f"{where}: {key} must be from 0 to {MAX_RETENTION_DAYS:,} days (a century), not "
            f"{value}; leave it out for no limit"
        )
    return float(value)
