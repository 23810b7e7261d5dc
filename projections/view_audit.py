"""What the model saw at a version, entry by entry, against the full raw history.

For every entry up to the version: shown in the prompt, summarised by the
compaction in force, pinned ahead of the summary, pruned or guarded (and
why). And for assistant turns that name the prompt view they answered
(``prompt_ref``): whether replaying that view gives the same request hash, so
"exactly what the model saw" is proven, not assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from domain.content import Role
from projections.prompt_formats import PromptRenderer
from projections.session_history import RecordedErasure, SessionHistory

# Each verification renders a past view; the newest this many are checked.
MAX_VERIFIED_TURNS = 50


@dataclass(frozen=True, slots=True)
class EntryStatus:
    entry_id: str
    role: str
    version: int
    # "shown", "summarised", "pinned", "pruned", "guarded", "retracted" or "cleared".
    status: str
    # For summarised: the compaction's version; pruned: the prune's decision; guarded: the guard's.
    detail: str


@dataclass(frozen=True, slots=True)
class TurnVerification:
    entry_id: str
    view_version: int
    provider_format: str
    claimed_hash: str
    replayed_hash: str

    @property
    def verified(self) -> bool:
        return self.claimed_hash == self.replayed_hash


@dataclass(frozen=True)
class ViewAudit:
    session_id: str
    version: int
    entries: list[EntryStatus]
    turns: list[TurnVerification]
    # Every erasure of the session: the content is gone, the fact stays.
    erasures: list[RecordedErasure] = field(default_factory=list)


def audit_view(history: SessionHistory, version: int | None = None) -> ViewAudit:
    history = history.whole()  # the raw history, every entry of it
    view = history.prompt_view(version)
    log = view.log
    compaction = log.compaction
    pinned = {e.id for e in log.pinned}
    withdrawn = history.withdrawn(log.version)
    statuses = []
    for position, (entry, entry_version) in enumerate(history.entries_upto(log.version)):
        if position in withdrawn:
            status, detail = withdrawn[position].split(" ", 1)
        elif entry.id in pinned:
            status, detail = "pinned", "a system entry kept ahead of the summary"
        elif compaction is not None and position < log.first_position:
            status, detail = "summarised", f"by the compaction at version {compaction.version}"
        elif entry.id in view.pruned:
            decision = view.pruned[entry.id]
            kept = f"head {decision.head_chars}, tail {decision.tail_chars}"
            status, detail = "pruned", f"{decision.action.value} ({kept})"
        elif entry.id in view.guarded:
            guard = view.guarded[entry.id][0]
            status, detail = "guarded", f"{guard.action.value}: {guard.reason}"
        else:
            status, detail = "shown", ""
        statuses.append(EntryStatus(entry.id, entry.role.value, entry_version, status, detail))
    return ViewAudit(
        log.session_id,
        log.version,
        statuses,
        _verify(history, log.version),
        history.erasures(),
    )


def _verify(history: SessionHistory, version: int) -> list[TurnVerification]:
    claims = [
        (entry.id, entry.prompt_ref)
        for entry, _ in history.entries_upto(version)
        if entry.role is Role.ASSISTANT and entry.prompt_ref is not None
    ][-MAX_VERIFIED_TURNS:]
    renderer = PromptRenderer()
    verified = []
    for entry_id, ref in claims:
        assert ref is not None
        replayed = ""
        if 1 <= ref.version <= history.version:
            replayed = renderer.render(history.prompt_view(ref.version), ref.format).request_hash
        verified.append(TurnVerification(entry_id, ref.version, ref.format, ref.hash, replayed))
    return verified
