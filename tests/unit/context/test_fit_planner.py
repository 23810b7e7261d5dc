"""The plan that always fits: drop the oldest, trim the turn's results, cut inside it."""

from __future__ import annotations

from domain.content import Entry
from domain.context.fit_planner import Trim, least_loss_fit, plan_fit
from domain.pruning import PruneAction, PruneDecision
from tests.unit.support import assistant, call, system, tool, user


def _chat(turns: int, tokens: int = 1_000) -> list[Entry]:
    entries: list[Entry] = []
    for i in range(turns):
        entries.append(user(f"question {i}", id=f"u{i}", tokens=tokens))
        entries.append(assistant(f"answer {i}", id=f"a{i}", tokens=tokens))
    return entries


def _trims(entries: list[Entry], soft: int, hard: int = 10) -> dict[str, tuple[Trim, ...]]:
    return {
        e.id: (
            Trim(PruneDecision(e.id, PruneAction.SOFT_TRIM, 1_500, 1_500), soft),
            Trim(PruneDecision(e.id, PruneAction.HARD_CLEAR, 0, 0), hard),
        )
        for e in entries
        if e.tool_results
    }


def test_the_oldest_go_until_the_rest_fits() -> None:
    entries = [system("rules", id="sys", tokens=1_000), *_chat(100)]
    plan = plan_fit(entries, system_tokens=500, limit=80_000, summary_tokens=2_000)
    assert plan.fits and plan.cut is not None and not plan.prunes
    # 500 system prompt + 1,000 pinned + 2,000 summary leave 76,500 for 76 messages.
    assert entries[plan.cut].id == "u62"
    assert plan.tokens_after == 500 + 1_000 + 2_000 + 76_000
    assert plan.to_dict(entries)["droppedMessages"] == 124


def test_the_turn_in_progress_is_kept_and_its_results_trimmed_oldest_first() -> None:
    turn = [
        user("fix the build", id="u-now", tokens=50),
        assistant("", id="a1", calls=[call("c1")], tokens=50),
        tool("c1", "log one", id="t1", tokens=6_000),
        assistant("", id="a2", calls=[call("c2")], tokens=50),
        tool("c2", "log two", id="t2", tokens=6_000),
    ]
    entries = [*_chat(3), *turn]
    plan = plan_fit(
        entries,
        system_tokens=0,
        limit=8_000,
        summary_tokens=500,
        trims=_trims(entries, soft=800),
    )
    assert plan.fits
    assert entries[plan.cut or 0].id == "u-now"
    # Only the older result needed trimming; the newest is shown whole.
    assert [p.entry_id for p in plan.prunes] == ["t1"]
    assert plan.tokens_after == 500 + 50 + 50 + 800 + 50 + 6_000


def test_without_a_cut_the_summary_in_force_still_counts() -> None:
    # The whole log is the turn in progress: nothing before it to drop, and the
    # summary in force stays in the prompt beside what is trimmed.
    turn = [user("fix the build", id="u-now", tokens=50)]
    for i in range(4):
        turn.append(assistant("", id=f"a{i}", calls=[call(f"c{i}")], tokens=50))
        turn.append(tool(f"c{i}", "log", id=f"t{i}", tokens=3_000))
    plan = plan_fit(
        turn,
        system_tokens=0,
        limit=9_000,
        summary_tokens=500,
        summary_in_force_tokens=2_000,
        trims=_trims(turn, soft=800),
    )
    assert plan.fits and plan.cut is None
    assert plan.tokens_before == 2_000 + 50 + 4 * 3_050
    # Two trimmed would do were the summary not there (7,850); with it, three.
    assert [p.entry_id for p in plan.prunes] == ["t0", "t1", "t2"]
    assert plan.tokens_after == 2_000 + 250 + 3 * 800 + 3_000 <= 9_000


def test_results_are_cleared_when_trimming_is_not_enough() -> None:
    turn = [user("go", id="u-now", tokens=50)]
    for i in range(6):
        turn.append(assistant("", id=f"a{i}", calls=[call(f"c{i}")], tokens=50))
        turn.append(tool(f"c{i}", "out", id=f"t{i}", tokens=3_000))
    entries = [*_chat(2), *turn]
    plan = plan_fit(
        entries, system_tokens=0, limit=4_000, summary_tokens=300, trims=_trims(entries, 700)
    )
    assert plan.fits
    actions = {p.entry_id: p.action for p in plan.prunes}
    assert actions["t0"] is PruneAction.HARD_CLEAR
    assert all(entries[plan.cut or 0].id == "u-now" for _ in [0])


def test_every_result_is_trimmed_shorter_before_any_is_cleared() -> None:
    turn = [user("go", id="u-now", tokens=50)]
    for i in range(6):
        turn.append(assistant("", id=f"a{i}", calls=[call(f"c{i}")], tokens=50))
        turn.append(tool(f"c{i}", "out", id=f"t{i}", tokens=3_000))
    entries = [*_chat(2), *turn]
    trims = {
        entry_id: (soft, Trim(PruneDecision(entry_id, PruneAction.SOFT_TRIM, 300, 500), 200), hard)
        for entry_id, (soft, hard) in _trims(entries, 700).items()
    }
    plan = plan_fit(entries, system_tokens=0, limit=4_000, summary_tokens=300, trims=trims)
    assert plan.fits
    # The oldest two at their short head and tail make room: none is cleared, so the
    # last lines of each (a log's error) still reach the model.
    shown = {p.entry_id: (p.action, p.head_chars, p.tail_chars) for p in plan.prunes}
    short, soft = (PruneAction.SOFT_TRIM, 300, 500), (PruneAction.SOFT_TRIM, 1_500, 1_500)
    assert shown == {"t0": short, "t1": short, "t2": soft, "t3": soft, "t4": soft, "t5": soft}
    # Where even short ones do not fit, the oldest are cleared.
    tight = plan_fit(entries, system_tokens=0, limit=1_500, summary_tokens=300, trims=trims)
    assert tight.fits
    assert {p.entry_id: p.action for p in tight.prunes}["t0"] is PruneAction.HARD_CLEAR


def test_a_turn_too_long_for_the_window_is_cut_inside_carrying_its_user_message() -> None:
    turn = [user("refactor everything", id="u-now", tokens=200)]
    for i in range(40):
        turn.append(assistant(f"step {i}", id=f"a{i}", calls=[call(f"c{i}")], tokens=400))
        turn.append(tool(f"c{i}", "ok", id=f"t{i}", tokens=20))
    entries = [*_chat(2), *turn]
    plan = plan_fit(entries, system_tokens=0, limit=6_000, summary_tokens=500)
    assert plan.fits
    assert plan.carried == "u-now"
    assert plan.cut is not None and entries[plan.cut].id.startswith("a")
    assert plan.tokens_after <= 6_000
    # The carried message is counted in the summary's room.
    kept = sum(e.token_count for e in entries[plan.cut :])
    assert plan.tokens_after == 500 + 200 + kept


def test_what_cannot_fit_says_what_fills_it() -> None:
    entries = [*_chat(2), user("a very long message", id="huge", tokens=9_000)]
    plan = plan_fit(entries, system_tokens=0, limit=5_000, summary_tokens=300)
    assert not plan.fits
    assert "huge" in plan.reason and "9,000" in plan.reason


def test_the_turn_in_progress_is_kept_whole_at_the_budget_before_it_is_cut_inside() -> None:
    """Cutting inside the turn fits the tighter target, clearing its results only the
    budget: the model keeps reading its turn, results cleared, not just the request."""
    turn = [user("fix the build", id="u-now", tokens=3_000)]
    for i in range(10):
        turn.append(assistant("", id=f"a{i}", calls=[call(f"c{i}")], tokens=300))
        turn.append(tool(f"c{i}", "log", id=f"t{i}", tokens=4_000))
    entries = [*_chat(3), *turn]
    plan, room = least_loss_fit(
        entries,
        system_tokens=0,
        limits=(5_000, 7_000),
        summary_rooms=(500, 100),
        trims=_trims(entries, soft=2_000),
    )
    assert plan.fits and plan.carried is None and room == 500
    assert entries[plan.cut or 0].id == "u-now" and plan.limit_tokens == 7_000
    # Where nothing else fits, the cut inside the turn still does.
    plan, _ = least_loss_fit(
        entries,
        system_tokens=0,
        limits=(4_000,),
        summary_rooms=(500, 100),
        trims=_trims(entries, soft=2_000),
    )
    assert plan.fits and plan.carried == "u-now"
