"""SessionHistory: the read side folded from a session's events, at any version."""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field, replace
from datetime import timedelta

import pytest

from domain.compaction_events import CompactionRecorded, CompactionRedone, CompactionUndone
from domain.content import Entry
from domain.errors import EntryNotFound, InvalidCutPoint, VersionOutOfRange
from domain.pruning import PruneDecision
from domain.session import Session
from domain.session_events import EntriesAppended, Event, PruneRecorded, SettingsChanged, Started
from domain.settings import PruningPolicy, SessionSettings
from projections.session_history import SessionHistory, load_from_cut
from tests.unit.support import Tracked, assistant, call, clear, custom, tool, trim, user

# -- a generated session and an independent reference fold --------------------------------


def generate_session(seed: int, steps: int = 120) -> Tracked:
    """A session built by random commands: turns with tool calls, compactions, prunes, settings.

    Commands the aggregate refuses (bad cut points) are simply not recorded.
    """
    rng = random.Random(seed)
    tracked = Tracked(f"gen-{seed}")
    open_calls: list[str] = []
    next_call = 0
    for _ in range(steps):
        op = rng.random()
        if op < 0.45:
            batch: list[Entry] = []
            # Answer the open calls first, in random order, with the odd runtime
            # note in between (notes may sit between a call and its result).
            rng.shuffle(open_calls)
            while open_calls:
                batch.append(
                    tool(open_calls.pop(), "x" * rng.randint(0, 300), tokens=rng.randint(1, 80))
                )
                if rng.random() < 0.2:
                    batch.append(custom("progress", tokens=1))
            batch.append(user(f"question {rng.random()}", tokens=rng.randint(1, 30)))
            calls = [call(f"c{next_call + i}") for i in range(rng.choice([0, 0, 1, 2, 3]))]
            next_call += len(calls)
            batch.append(assistant("answer", calls=calls, tokens=rng.randint(1, 50)))
            open_calls.extend(c.id for c in calls)
            if rng.random() < 0.2:
                batch.append(custom("note", tokens=rng.randint(0, 5)))
            tracked.append(*batch)
        elif op < 0.65:
            ids = [e.id for e in tracked.history.entries]
            if ids:
                with contextlib.suppress(InvalidCutPoint):
                    tracked.compact(
                        rng.choice(ids),
                        summary=f"summary at {tracked.version}",
                        summary_tokens=rng.randint(1, 40),
                    )
        elif op < 0.85:
            log = tracked.history.durable_log()
            tools = [e.id for e in log.entries if e.tool_results]
            if tools:
                chosen = rng.sample(tools, rng.randint(1, min(3, len(tools))))
                head, tail = rng.randint(0, 50), rng.randint(0, 50)
                tracked.prune(*(rng.choice([clear(i), trim(i, head, tail)]) for i in chosen))
        else:
            tracked.change_settings(
                SessionSettings(
                    title=f"v{tracked.version}", pruning=PruningPolicy(mode="cache-ttl")
                ),
                (rng.randint(20_000, 300_000), "session"),
            )
    return tracked


@dataclass
class Reference:
    """What the durable log and prompt view should be, folded naively from events."""

    entries: list[Entry] = field(default_factory=list)
    compaction: CompactionRecorded | None = None
    pruned: dict[str, PruneDecision] = field(default_factory=dict)
    settings: tuple[SessionSettings, int] | None = None

    @classmethod
    def fold(cls, events: list[Event]) -> Reference:
        ref = cls()
        for event in events:
            if isinstance(event, EntriesAppended):
                ref.entries.extend(event.entries)
            elif isinstance(event, CompactionRecorded):
                ref.compaction = event
            elif isinstance(event, PruneRecorded):
                ref.pruned.update((d.entry_id, d) for d in event.decisions)
            elif isinstance(event, Started | SettingsChanged):
                ref.settings = (event.settings, event.context_window_tokens)
        return ref

    def kept(self) -> list[Entry]:
        if self.compaction is None:
            return self.entries
        ids = [e.id for e in self.entries]
        return self.entries[ids.index(self.compaction.compaction.first_kept_entry_id) :]


SEEDS = [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_sessions_exercise_every_event(seed: int) -> None:
    """The generator really produces compactions, prunes and settings changes (so the
    properties below are not checked on trivial sessions)."""
    events = generate_session(seed).events
    kinds = {type(e) for e in events}
    assert kinds == {
        Started,
        EntriesAppended,
        CompactionRecorded,
        PruneRecorded,
        SettingsChanged,
    }
    assert sum(isinstance(e, CompactionRecorded) for e in events) >= 2


@pytest.mark.parametrize("seed", SEEDS)
def test_any_version_equals_a_fresh_fold_up_to_it(seed: int) -> None:
    """durable_log and prompt_view at every version equal those of a history folded from
    only the events up to that version, and what a naive fold of those events says."""
    tracked = generate_session(seed)
    live = tracked.history
    for version in range(1, tracked.version + 1):
        fresh = SessionHistory(live.session_id)
        fresh.apply(tracked.events[:version])
        assert live.durable_log(version) == fresh.durable_log()
        assert live.prompt_view(version) == fresh.prompt_view()

        ref = Reference.fold(tracked.events[:version])
        log = live.durable_log(version)
        kept = ref.kept()
        assert log.version == version
        assert list(log.entries) == kept
        assert log.first_position == len(ref.entries) - len(kept)
        summary_tokens = ref.compaction.compaction.summary_tokens if ref.compaction else 0
        assert log.total_tokens == summary_tokens + sum(e.token_count for e in kept)
        if ref.compaction is None:
            assert log.compaction is None
        else:
            assert log.compaction is not None
            assert log.compaction.compaction == ref.compaction.compaction
            assert log.compaction.version == ref.compaction.originator_version

        view = live.prompt_view(version)
        kept_ids = {e.id for e in kept}
        assert view.pruned == {k: d for k, d in ref.pruned.items() if k in kept_ids}
        assert ref.settings is not None
        assert (view.settings, view.context_window_tokens) == ref.settings
    assert live.durable_log() == live.durable_log(tracked.version)


def test_apply_refuses_gaps() -> None:
    """Events must follow the history's version without gaps or repeats."""
    tracked = Tracked()
    tracked.append(user("a"))
    tracked.append(user("b"))
    history = SessionHistory(tracked.history.session_id)
    history.apply(tracked.events[:1])
    with pytest.raises(ValueError, match="does not follow"):
        history.apply(tracked.events[2:])
    with pytest.raises(ValueError, match="does not follow"):
        history.apply(tracked.events[:1])
    assert history.version == 1


# -- versions and times ---------------------------------------------------------------


def test_version_at_time() -> None:
    """The version at a moment is the last one recorded at or before it."""
    tracked = Tracked()
    for i in range(5):
        tracked.append(user(f"m{i}"))
    times = [e.timestamp for e in tracked.events]
    history = tracked.history
    for moment in [*times, *(t + timedelta(microseconds=1) for t in times)]:
        expected = max(e.originator_version for e in tracked.events if e.timestamp <= moment)
        assert history.version_at_time(moment) == expected
    assert history.version_at_time(times[-1] + timedelta(days=1)) == tracked.version
    with pytest.raises(VersionOutOfRange, match="did not exist yet"):
        history.version_at_time(times[0] - timedelta(microseconds=1))


def test_resolve_version() -> None:
    """None and 0 mean the current version; anything outside 1..current is out of range."""
    tracked = Tracked()
    tracked.append(user("a"))
    history = tracked.history
    assert history.resolve_version(None) == history.resolve_version(0) == 2
    assert history.resolve_version(1) == 1
    for bad in (-1, 3, 100):
        with pytest.raises(VersionOutOfRange, match="out of range"):
            history.resolve_version(bad)
        with pytest.raises(VersionOutOfRange):
            history.durable_log(bad)
        with pytest.raises(VersionOutOfRange):
            history.prompt_view(bad)


def test_log_at_version_one_is_empty() -> None:
    """Right after start the log has no entries and no tokens."""
    tracked = Tracked()
    tracked.append(user("a", tokens=4))
    log = tracked.history.durable_log(1)
    assert (list(log.entries), log.total_tokens, log.compaction) == ([], 0, None)


def test_entry_lookup() -> None:
    """Entries are found by id, with the version that appended them; unknown ids are refused."""
    tracked = Tracked()
    tracked.append(user("a", id="u1"))
    tracked.append(assistant("b", id="a1"))
    history = tracked.history
    assert history.entry("a1").id == "a1"
    assert history.entry_version(history.position_of("a1") or 0) == 3
    with pytest.raises(EntryNotFound, match="'zz'"):
        history.entry("zz")


# -- prompt view ----------------------------------------------------------------------


def _with_results() -> Tracked:
    tracked = Tracked()
    tracked.append(
        user("go", id="u1", tokens=5),
        assistant(id="a1", calls=[call("c1"), call("c2")], tokens=10),
        tool("c1", "A" * 100, id="t1", tokens=50),
        tool("c2", "B" * 100, id="t2", tokens=60),
        assistant("done", id="a2", tokens=7),
    )
    tracked.append(user("more", id="u2", tokens=3), assistant("ok", id="a3", tokens=2))
    return tracked


def test_prompt_view_applies_prunes_recorded_by_its_version() -> None:
    """A prune shows from its own version on, not before; the latest decision per entry wins."""
    tracked = _with_results()
    tracked.prune(trim("t1"))
    first = tracked.version
    tracked.prune(clear("t1"), trim("t2"))
    second = tracked.version
    history = tracked.history
    assert history.prompt_view(first - 1).pruned == {}
    assert history.prompt_view(first).pruned == {"t1": trim("t1")}
    assert history.prompt_view(second).pruned == {"t1": clear("t1"), "t2": trim("t2")}
    # Pruning never changes the durable log.
    assert history.durable_log(second).entries == history.durable_log(first - 1).entries


def test_prompt_view_drops_prunes_of_compacted_entries() -> None:
    """After a compaction, prunes of entries no longer in the log are not part of the view."""
    tracked = _with_results()
    tracked.prune(clear("t1"), clear("t2"))
    pruned_at = tracked.version
    tracked.compact("u2", summary="earlier work", summary_tokens=11)
    history = tracked.history
    assert set(history.prompt_view(pruned_at).pruned) == {"t1", "t2"}
    assert history.prompt_view().pruned == {}
    assert [e.id for e in history.prompt_view().log.entries] == ["u2", "a3"]


def test_prompt_view_settings_as_of_version() -> None:
    """The view carries the settings and window in force at its version."""
    tracked = _with_results()
    before = tracked.version
    tracked.change_settings(SessionSettings(title="new"), (32_000, "session"))
    history = tracked.history
    assert (
        history.prompt_view(before).settings.title,
        history.prompt_view(before).context_window_tokens,
    ) == ("", 200_000)
    assert (history.prompt_view().settings.title, history.prompt_view().context_window_tokens) == (
        "new",
        32_000,
    )


def test_total_tokens_is_summary_plus_kept_entries() -> None:
    """The log's token total is the summary's tokens plus the kept entries' tokens."""
    tracked = _with_results()
    assert tracked.history.durable_log().total_tokens == 5 + 10 + 50 + 60 + 7 + 3 + 2
    tracked.compact("a2", summary="s", summary_tokens=20)
    log = tracked.history.durable_log()
    assert [e.id for e in log.entries] == ["a2", "u2", "a3"]
    assert log.total_tokens == 20 + 7 + 3 + 2
    tracked.append(user("x", tokens=9))
    assert tracked.history.durable_log().total_tokens == 20 + 7 + 3 + 2 + 9


def test_compactions_as_of_version() -> None:
    """Every compaction recorded by a version, oldest first, with its cut position."""
    tracked = _with_results()
    tracked.compact("a2", summary="one")
    first = tracked.version
    tracked.append(user("x", id="u3"))
    tracked.compact("u3", summary="two")
    history = tracked.history
    assert [c.compaction.summary for c in history.compactions(first)] == ["one"]
    assert [(c.compaction.summary, c.first_kept_position) for c in history.compactions()] == [
        ("one", 4),
        ("two", 7),
    ]
    assert history.compactions(first - 1) == []


def test_system_entries_are_pinned_ahead_of_the_summary_whatever_the_cut() -> None:
    """A compaction never drops the system prompt: both views keep it, first."""
    from projections.prompt_formats import to_anthropic, to_openai
    from tests.unit.support import system

    tracked = Tracked()
    tracked.append(system("You are terse.", id="sys", tokens=4))
    tracked.append(user("one", id="u1", tokens=2), assistant("A", id="a1", tokens=1))
    tracked.append(user("two", id="u2", tokens=2), assistant("B", id="a2", tokens=1))
    tracked.compact("u2", summary="they said one", summary_tokens=3)

    log = tracked.history.durable_log()
    assert [e.id for e in log.pinned] == ["sys"]
    assert [e.id for e in log.entries] == ["u2", "a2"]
    assert log.total_tokens == 4 + 3 + 2 + 1

    view = tracked.history.prompt_view()
    messages = to_openai(view)
    assert messages[0] == {"role": "system", "content": "You are terse."}
    assert "they said one" in messages[1]["content"]
    system_blocks, anthropic = to_anthropic(view)
    assert system_blocks == [{"type": "text", "text": "You are terse."}]
    assert "they said one" in anthropic[0]["content"][0]["text"]
    # Before the compaction the system entry is simply the first entry.
    before = tracked.history.durable_log(tracked.version - 1)
    assert before.pinned == [] and before.entries[0].id == "sys"


# -- undone compactions and histories loaded from a cut -------------------------------


def generate_rich_session(seed: int, steps: int = 160) -> Tracked:
    """The generated session with system entries, system prompts and undone compactions
    mixed in."""
    from domain.errors import InvalidCutPoint as NothingToUndo
    from domain.system_prompt import SystemPrompt
    from tests.unit.support import system

    rng = random.Random(seed * 7919)
    tracked = Tracked(f"rich-{seed}")
    tracked.append(system("be brief", id=f"sys-{seed}", tokens=3), user("hi", tokens=2))
    base = generate_session(seed, steps)
    # Replay the base session's commands' events, interleaving undos and the rest.
    for event in base.events[1:]:
        if isinstance(event, EntriesAppended):
            entries = list(event.entries)
            if rng.random() < 0.05 and not tracked.session.open_tool_calls:
                entries.insert(0, system(f"note {tracked.version}", tokens=2))
            tracked.append(*[replace(e, parent_id=None) for e in entries])
        elif isinstance(event, CompactionRecorded):
            with contextlib.suppress(InvalidCutPoint):
                tracked.compact(
                    event.compaction.first_kept_entry_id,
                    summary=event.compaction.summary,
                    summary_tokens=event.compaction.summary_tokens,
                )
        elif isinstance(event, PruneRecorded):
            with contextlib.suppress(Exception):
                tracked.prune(*event.decisions)
        elif isinstance(event, SettingsChanged):
            tracked.change_settings(
                event.settings, (event.context_window_tokens, event.context_window_source)
            )
        op = rng.random()
        if op < 0.08:
            with contextlib.suppress(NothingToUndo):
                tracked.undo()
        elif op < 0.12:
            tracked.session.set_system_prompt(
                SystemPrompt(text=f"prompt {tracked.version}"), f"fp{tracked.version}"
            )
            tracked.sync()
        elif op < 0.2 and tracked.history.undos():
            # Take back the latest undo (refused when the cut moved on since).
            with contextlib.suppress(NothingToUndo):
                tracked.redo(tracked.history.undos()[-1].version)
    return tracked


def _fetcher(events: list[Event]):  # type: ignore[no-untyped-def]
    def fetch(after: int, upto: int | None) -> list[Event]:
        return [e for e in events if after < e.originator_version <= (upto or len(events))]

    return fetch


def _aggregate(events: list[Event]) -> Session:
    session = None
    for event in events:
        session = event.mutate(session)  # type: ignore[arg-type]
    assert isinstance(session, Session)
    return session


RICH_SEEDS = [1, 2, 3, 4]


@pytest.mark.parametrize("seed", RICH_SEEDS)
def test_undone_compactions_bring_back_the_cut_before_them(seed: int) -> None:
    """At every version the durable log keeps the entries from the cut of the latest
    compaction still in force, as a naive fold with a stack of compactions says."""
    tracked = generate_rich_session(seed)
    kinds = {type(e) for e in tracked.events}
    assert CompactionUndone in kinds
    for version in range(1, tracked.version + 1):
        entries: list[Entry] = []
        stack: list[CompactionRecorded] = []
        # The stack each undo left and the compactions it took back.
        taken: dict[int, list[CompactionRecorded]] = {}
        for event in tracked.events[:version]:
            if isinstance(event, EntriesAppended):
                entries.extend(event.entries)
            elif isinstance(event, CompactionRecorded):
                stack.append(event)
            elif isinstance(event, CompactionUndone):
                taken[event.originator_version] = [
                    c for c in stack if c.originator_version >= event.compaction_version
                ]
                stack = [c for c in stack if c.originator_version < event.compaction_version]
            elif isinstance(event, CompactionRedone):
                stack += taken[event.undo_version]
                assert [c.originator_version for c in stack][-len(event.compaction_versions) :] == (
                    list(event.compaction_versions)
                )
        log = tracked.history.durable_log(version)
        start = stack[-1].first_kept_position if stack else 0
        assert log.first_position == start
        assert [e.id for e in log.entries] == [e.id for e in entries[start:]]
        assert (log.compaction.version if log.compaction else 0) == (
            stack[-1].originator_version if stack else 0
        )
        fresh = SessionHistory(tracked.history.session_id)
        fresh.apply(tracked.events[:version])
        assert tracked.history.prompt_view(version) == fresh.prompt_view()
    # The aggregate's estimate and cut follow the undos.
    assert tracked.session.first_kept_position == tracked.history.durable_log().first_position


@pytest.mark.parametrize("seed", RICH_SEEDS)
def test_a_history_loaded_from_the_cut_answers_as_the_whole_one(seed: int) -> None:
    """Loaded from the cut in force after any event, a history answers every version,
    every entry and every History question as the whole fold does; it folds the
    earlier part only when asked about it."""
    tracked = generate_rich_session(seed)
    loaded = 0
    for upto in range(2, len(tracked.events) + 1, 3):
        events = tracked.events[:upto]
        fetch = _fetcher(events)
        whole = SessionHistory(tracked.history.session_id)
        whole.apply(events)
        cut = load_from_cut(_aggregate(events), fetch)
        if cut is None:
            continue
        loaded += 1
        assert cut.loaded_whole is None
        complete_from = cut._complete_from
        for version in range(complete_from, upto + 1):
            assert cut.durable_log(version) == whole.durable_log(version)
            assert cut.prompt_view(version) == whole.prompt_view(version)
            assert cut.system_prompt(version) == whole.system_prompt(version)
        assert cut.loaded_whole is None  # the views from the cut on read nothing earlier
        assert cut.prompt_tokens_if_cut_at(
            whole.durable_log().first_position, 5
        ) == whole.prompt_tokens_if_cut_at(whole.durable_log().first_position, 5)
        # Earlier versions and entries fold the rest, once.
        for version in range(1, upto + 1):
            assert cut.durable_log(version) == whole.durable_log(version)
            assert cut.prompt_view(version) == whole.prompt_view(version)
        for position, entry in enumerate(whole.entries):
            assert cut.entry(entry.id) == entry
            assert cut.position_of(entry.id) == position
            assert cut.entry_version(position) == whole.entry_version(position)
            assert cut.earliest_call_answered_from(position) == (
                whole.earliest_call_answered_from(position)
            )
        assert cut.compactions() == whole.compactions()
        assert cut.prune_count() == whole.prune_count()
    assert loaded >= 5


def test_a_history_loaded_from_the_cut_reads_only_what_the_prompt_keeps() -> None:
    """A long session compacted to a few entries: the load reads the tail and the few
    earlier events still in force, and extends backwards only when asked."""
    from domain.system_prompt import SystemPrompt
    from tests.unit.support import system

    tracked = Tracked("long")
    tracked.append(system("rules", id="rules", tokens=2))
    tracked.session.set_system_prompt(SystemPrompt(text="be kind"), "fp")
    tracked.sync()
    for i in range(300):
        tracked.append(user(f"q{i}", id=f"q{i}", tokens=1), assistant(f"a{i}", id=f"a{i}"))
    tracked.compact("q295", summary="long ago")
    tracked.append(user("more", tokens=1))
    read: list[tuple[int, int | None]] = []
    fetch = _fetcher(tracked.events)

    def counting(after: int, upto: int | None) -> list[Event]:
        read.append((after, upto))
        return fetch(after, upto)

    cut = load_from_cut(_aggregate(tracked.events), counting)
    assert cut is not None
    events_read = sum(len(fetch(a, u)) for a, u in read)
    assert events_read <= 10
    assert len(cut.entries) == 11
    view = cut.prompt_view()
    assert [e.id for e in view.log.pinned] == ["rules"]
    assert view.system_prompt.text == "be kind"
    assert view == tracked.history.prompt_view()
    assert cut.loaded_whole is None
    assert cut.entry("q3").id == "q3"  # compacted away: the whole history is folded
    assert cut.loaded_whole is not None
    # New events reach both.
    tracked.append(user("again", tokens=1))
    cut.apply(tracked.events[-1:])
    assert cut.loaded_whole.prompt_view() == cut.prompt_view() == tracked.history.prompt_view()


def test_undo_twice_goes_back_two_cuts_and_compacting_again_reapplies() -> None:
    tracked = Tracked("undo")
    for i in range(6):
        tracked.append(user(f"q{i}", id=f"q{i}", tokens=1), assistant(f"a{i}", id=f"a{i}"))
    tracked.compact("q2", summary="first")
    first = tracked.version
    tracked.append(user("q6", id="q6", tokens=1))
    tracked.compact("q4", summary="second")
    second = tracked.version
    assert tracked.history.durable_log().first_position == 8
    tracked.undo()
    assert tracked.history.durable_log().first_position == 4
    assert tracked.history.durable_log().compaction.version == first  # type: ignore[union-attr]
    assert tracked.session.first_kept_position == 4
    tracked.undo()
    assert tracked.history.durable_log().first_position == 0
    assert tracked.history.durable_log().compaction is None
    assert tracked.session.first_kept_position == 0
    assert tracked.session.prompt_tokens == tracked.history.prompt_view().estimated_tokens
    # Replay before the undos still shows the compacted log.
    assert tracked.history.durable_log(second).first_position == 8
    with pytest.raises(InvalidCutPoint, match="nothing to undo"):
        tracked.undo()
    tracked.compact("q4", summary="again")
    assert tracked.history.durable_log().first_position == 8
    # Undoing an older compaction takes the later ones with it.
    tracked.append(user("q7", id="q7", tokens=1))
    tracked.compact("q6", summary="third")
    again = tracked.history.durable_log().compaction
    with pytest.raises(InvalidCutPoint, match="no compaction in force"):
        tracked.undo(first)
    assert again is not None
    tracked.undo(again.version - 2)
    assert tracked.history.durable_log().first_position == 0


def test_undos_and_redos_chain_newest_first_and_redo_restores_exactly() -> None:
    tracked = Tracked("redo")
    for i in range(8):
        tracked.append(user(f"q{i}", id=f"q{i}", tokens=1), assistant(f"a{i}", id=f"a{i}"))
    tracked.compact("q2", summary="first")
    first = tracked.version
    tracked.append(user("q8", id="q8", tokens=1))
    tracked.compact("q5", summary="second")
    second = tracked.version
    compacted_view = tracked.history.prompt_view()
    compacted_cuts = tuple(tracked.session.cuts)

    tracked.undo()  # the second
    undo_second = tracked.version
    tracked.undo()  # the first
    undo_first = tracked.version
    assert tracked.history.durable_log().first_position == 0
    # Newest first: the undo of the second left the first in force, which is gone now.
    with pytest.raises(InvalidCutPoint, match="changed since the undo"):
        tracked.redo(undo_second)
    with pytest.raises(InvalidCutPoint, match="no undo of a compaction was recorded at version 3"):
        tracked.redo(3)
    tracked.redo(undo_first)
    log = tracked.history.durable_log()
    assert log.compaction is not None and log.compaction.version == first
    assert log.compaction.compaction.summary == "first" and log.first_position == 4
    with pytest.raises(InvalidCutPoint, match="already taken back"):
        tracked.redo(undo_first)
    tracked.redo(undo_second)
    # Exactly as before the undos: the same view, cut and estimate.
    view = tracked.history.prompt_view()
    assert view.log.compaction == compacted_view.log.compaction
    assert view.log.entries == compacted_view.log.entries
    assert view.estimated_tokens == compacted_view.estimated_tokens
    assert tuple(tracked.session.cuts) == compacted_cuts
    assert tracked.session.prompt_tokens == view.estimated_tokens  # no system prompt here
    assert tracked.session.first_kept_position == compacted_view.log.first_position
    assert [c.version for c in tracked.history.compactions_in_force()] == [first, second]
    # Replay keeps every step: compacted, undone twice, redone once, redone twice.
    assert tracked.history.durable_log(undo_first).first_position == 0
    assert tracked.history.durable_log(undo_first + 1).first_position == 4
    assert tracked.history.durable_log(second).first_position == 10

    # A redo is taken back by undoing the compaction again, and that undo redone.
    tracked.append(user("q9", id="q9", tokens=1))
    tracked.undo()
    again = tracked.version
    assert tracked.history.durable_log().first_position == 4
    tracked.redo(again)
    assert tracked.history.durable_log().first_position == 10
    assert tracked.history.durable_log().entries[-1].id == "q9"
    # A compaction recorded after an undo must be undone before that undo is redone.
    tracked.undo()
    later_undo = tracked.version
    tracked.append(user("q10", id="q10", tokens=1))
    tracked.compact("q8", summary="third")
    with pytest.raises(InvalidCutPoint, match="changed since the undo"):
        tracked.redo(later_undo)
    tracked.undo()
    tracked.redo(later_undo)
    assert tracked.history.durable_log().compaction.version == second  # type: ignore[union-attr]

    # Loaded cold from the cut the redo brought back, the history answers as the whole.
    cold = load_from_cut(_aggregate(tracked.events), _fetcher(tracked.events))
    assert cold is not None
    assert cold.prompt_view() == tracked.history.prompt_view()
    for version in range(1, tracked.version + 1):
        assert cold.durable_log(version) == tracked.history.durable_log(version)
