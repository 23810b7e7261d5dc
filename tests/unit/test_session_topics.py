"""Stored events name their class by topic: moving a class must not change it."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

from eventsourcing.utils import get_topic, resolve_topic

from domain.session import Session, SessionEvent
from domain.settings import SessionSettings

# Where the event classes are defined; their topics name Session, not these.
EVENT_MODULES = {"domain.session_events", "domain.compaction_events"}


def test_every_event_keeps_the_topic_it_was_first_stored_under() -> None:
    classes = get_args(SessionEvent)
    topics = {get_topic(cls) for cls in classes}
    assert topics == {f"domain.session:Session.{cls.__name__}" for cls in classes}
    assert len(topics) == len(classes) == 16


def test_a_stored_topic_resolves_to_the_class_that_reads_it() -> None:
    for cls in get_args(SessionEvent):
        assert resolve_topic(f"domain.session:Session.{cls.__name__}") is cls
    assert get_topic(Session) == "domain.session:Session"
    assert get_topic(Session.Snapshot) == "domain.session:Session.Snapshot"


def test_a_recorded_event_is_stored_under_its_first_topic() -> None:
    session = Session.start("topics", SessionSettings(), (8_000, "default"))
    (started,) = session.collect_events()
    assert get_topic(type(started)) == "domain.session:Session.Started"
    assert started.originator_topic == "domain.session:Session"


def test_a_process_that_never_recorded_an_event_reads_its_topic() -> None:
    """A worker reads events it never wrote: each stored topic resolves in a fresh
    interpreter, before anything there asked for the class's topic."""
    classes = get_args(SessionEvent)
    assert {cls.__module__ for cls in classes} == EVENT_MODULES
    script = (
        "import importlib, sys\n"
        "from eventsourcing.utils import resolve_topic\n"
        "for arg in sys.argv[1:]:\n"
        "    module, name = arg.split(':')\n"
        "    cls = resolve_topic(f'domain.session:Session.{name}')\n"
        "    assert cls is getattr(importlib.import_module(module), name), cls\n"
    )
    defined_in = [f"{cls.__module__}:{cls.__name__}" for cls in classes]
    done = subprocess.run(
        [sys.executable, "-c", script, *defined_in], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
