"""A projection stopped partway through a catch-up longer than one batch, then
started again in the same process (a worker that lost and regained the lead),
finishes that catch-up by itself: no write or query needed to move it on."""

from __future__ import annotations

import time

from services.grpc.server import RunningServer
from services.readmodels import ReadModels
from services.readmodels.event_batches import BATCH
from services.readmodels.runner import ReadModelRunner

# Enough events for several batches, so that a stop after the first lands mid catch-up.
EVENTS = 4 * BATCH
CATCH_UP_SECONDS = 15.0


def _positions(models: ReadModels) -> dict[str, int]:
    # Read from the store, not through a query: a query would hurry the runner.
    return models.store.positions(sorted(models.store.models))


def _stop_after_first_batch(models: ReadModels, runner: ReadModelRunner, head: int) -> None:
    give_up_at = time.monotonic() + CATCH_UP_SECONDS
    while min(_positions(models).values()) <= 0:
        assert time.monotonic() < give_up_at, "the first batch was never applied"
        time.sleep(0.005)
    runner.stop()
    stopped_at = _positions(models)
    assert min(stopped_at.values()) < head, f"stopped too late to test: {stopped_at}"


def _reaches_by_itself(models: ReadModels, runner: ReadModelRunner, head: int) -> None:
    """Started again, with no write and no query, the models go on to ``head``."""
    stopped_at = _positions(models)
    runner.start()
    give_up_at = time.monotonic() + CATCH_UP_SECONDS
    reached = stopped_at
    while min(reached.values()) < head and time.monotonic() < give_up_at:
        with runner.progress:
            runner.progress.wait(0.1)
        reached = _positions(models)
    assert min(reached.values()) == head, (
        f"models stopped at {stopped_at} stayed at {reached}, head {head}"
    )


def test_a_projection_stopped_mid_catch_up_finishes_it_once_started_again(
    server: RunningServer,
) -> None:
    models = server.app.read_models
    assert models is not None and models.runner is not None
    runner = models.runner
    runner.stop()
    recorder = models.events.recorder
    n = 0
    # Positions are notification ids, which need not be consecutive: count the events.
    while len(recorder.select_notifications(start=None, limit=EVENTS)) < EVENTS:
        for _ in range(100):
            server.service.create_session(f"r{n}", lambda settings: settings)
            n += 1
    head = recorder.max_notification_id() or 0

    runner.start()
    _stop_after_first_batch(models, runner, head)
    _reaches_by_itself(models, runner, head)

    # A model set back by another process at an unchanged head (as `sessionstore
    # migrate` remaking its tables does), found by a query, then stopped mid-rebuild.
    models.store.reset("catalog")
    runner.hurry()
    _stop_after_first_batch(models, runner, head)
    _reaches_by_itself(models, runner, head)
