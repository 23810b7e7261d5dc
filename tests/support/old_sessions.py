"""Sessions with a past: pi files whose records carry the times they happened, imported
as the store imports any transcript, so a session's first and last events are as old
as a test needs (retention decides on those times)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from services.app.imports import ImportResult, ImportService
from services.app.sessions import SessionService


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def pi_file(
    session_id: str,
    times: Sequence[datetime],
    *,
    summary_at: int = 0,
    branch_at: datetime | None = None,
) -> bytes:
    """A user/assistant exchange per time (the last time the session's last event);
    ``summary_at``: a compaction summary at the end, of that many first exchanges;
    ``branch_at``: one more exchange at that time on a branch from the first answer,
    which the import makes a fork (the file's last record ends the main branch)."""
    lines = [{"type": "session", "version": 3, "id": session_id, "timestamp": _time(times[0])}]
    parent: str | None = None
    for n, moment in enumerate(times):
        for role, text in (("user", f"secret question {n}"), ("assistant", f"secret answer {n}")):
            entry_id = f"{role[0]}{n}"
            lines.append(_message(entry_id, parent, role, text, moment))
            parent = entry_id
        if n == 0 and branch_at is not None:
            lines.append(_message("ub", "a0", "user", "secret branch question", branch_at))
            lines.append(_message("ab", "ub", "assistant", "secret branch answer", branch_at))
    if summary_at:
        lines.append(
            {
                "type": "compaction",
                "id": "c1",
                "parentId": parent,
                "timestamp": _time(times[-1]),
                "summary": "secret summary of the early turns",
                "firstKeptEntryId": f"u{summary_at}",
                "tokensBefore": 1000,
            }
        )
    return "\n".join(json.dumps(line) for line in lines).encode()


def _message(entry_id: str, parent: str | None, role: str, text: str, at: datetime) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": _time(at),
        "message": {"role": role, "content": [{"type": "text", "text": text}]},
    }


def import_old_session(
    sessions: SessionService,
    stream: str,
    times: Sequence[datetime],
    labels: dict[str, str] | None = None,
    *,
    summary_at: int = 0,
    branch_at: datetime | None = None,
) -> ImportResult:
    """The session ``stream`` (``tenant/id``, or a bare id in the default tenant)
    imported with these times and labels."""
    own_id = stream.rpartition("/")[2]
    data = pi_file(own_id, times, summary_at=summary_at, branch_at=branch_at)
    return ImportService(sessions).import_transcript(
        data,
        "pi",
        session_id=stream,
        choose=lambda settings: replace(settings, labels=dict(labels or {})),
    )
