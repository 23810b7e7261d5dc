"""A lasting condition is logged when it starts and when it ends, not per attempt."""

from __future__ import annotations

import structlog

from services.logs import StateLog


def test_a_condition_is_logged_once_each_way_however_often_it_is_seen() -> None:
    with structlog.testing.capture_logs() as logged:
        state = StateLog(structlog.get_logger("t"), "cannot reach it", "reaches it again")
        state.ok()  # nothing was wrong: nothing to say
        for attempt in range(5):
            state.failed("connection refused", attempt=attempt)
        assert state.failing
        state.ok()
        state.ok()
        state.failed("timed out")
    assert [(e["event"], e["log_level"]) for e in logged] == [
        ("cannot reach it", "warning"),
        ("reaches it again", "info"),
        ("cannot reach it", "warning"),
    ]
    assert logged[0]["error"] == "connection refused" and logged[0]["attempt"] == 0
    assert logged[2]["error"] == "timed out"
