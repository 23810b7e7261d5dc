"""The projection as a process of its own (SESSIONSTORE_PROJECTIONS=worker).

`sessionstore-worker` (or `python -m services.readmodels.worker`) follows the
store and keeps every read model up to date until SIGTERM or SIGINT; servers
configured with `worker` then only read the tables. Killing it at any moment
loses nothing: the next worker continues from the tracked positions. Of
several workers on one PostgreSQL database one leads and the others wait to
take over (services.readmodels.leadership); on SQLite run one. The leader
also applies the retention policies on their schedule
(services.readmodels.retention).
"""

from __future__ import annotations

import signal
import sys
import threading

import structlog
from pydantic import ValidationError

from services.adapters.event_store import EventStore
from services.app.sessions import SessionService
from services.bootstrap import build_event_store, build_retention
from services.config import Config
from services.grpc.server import configure_logging
from services.readmodels.leadership import project_while_leading
from services.readmodels.retention import RetentionScheduler
from services.readmodels.service import ReadModels, build_read_models

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
log = structlog.get_logger(__name__)


def main() -> None:
    # As in the server: signals are taken by sigwait, never by a handler.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        config = Config()
    except ValidationError as error:
        sys.exit(f"sessionstore-worker: invalid configuration:\n{error}")
    configure_logging(config)
    events = build_event_store(config)
    models = build_read_models(
        events,
        config.database_url,
        run_projection=True,
        migrate_first=config.migrate_at_start,
        poll_seconds=config.projection_poll_seconds,
    )
    stopping = threading.Event()
    leads = threading.Event()
    leadership = threading.Thread(
        target=project_while_leading, args=(models, stopping, leads), name="leadership"
    )
    leadership.start()
    retention = scheduled_retention(config, events, models, leads)
    retaining = None
    if retention is not None:
        retaining = threading.Thread(target=retention.run, args=(stopping,), name="retention")
        retaining.start()
    received = signal.sigwait(STOP_SIGNALS)
    log.info("stopping", signal=signal.Signals(received).name)
    stopping.set()
    leadership.join()
    if retaining is not None:
        retaining.join()
    models.close()
    events.close()


def scheduled_retention(
    config: Config, events: EventStore, models: ReadModels, leading: threading.Event
) -> RetentionScheduler | None:
    """The retention policies applied while this worker leads; None without a file
    (then retention removes nothing)."""
    if config.retention_file is None:
        log.info("retention: no policy file (SESSIONSTORE_RETENTION_FILE), nothing removed")
        return None
    sessions = SessionService(config, events)
    return RetentionScheduler(
        build_retention(sessions, models),
        config.retention_file,
        config.retention_interval_seconds,
        leading,
    )


if __name__ == "__main__":
    main()
