"""The projection as a process of its own (SESSIONSTORE_PROJECTIONS=worker).

`sessionstore-worker` (or `python -m services.worker`) follows the store and
keeps every read model up to date until SIGTERM or SIGINT; servers configured
with `worker` then only read the tables. Killing it at any moment loses
nothing: the next worker continues from the tracked positions. Of several
workers on one PostgreSQL database one leads and the others wait to take over
(services.readmodels.leadership); on SQLite run one. Given a policy file, the
worker applies retention on its schedule while it holds the retention lock,
which it shares with servers that project in process
(services.app.retention_scheduler).

It sits beside the gRPC server at the top of the layers: like the server, it
composes the store's parts (through services.bootstrap) into a process.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import structlog

from services.adapters.start_errors import START_ERRORS, redacted, start_refusal
from services.bootstrap import build_events, build_scheduled_retention, build_sessions
from services.config import load_config
from services.logs import configure_logging, warn_of_unread_variables
from services.observability.setup import serve_worker_metrics
from services.readmodels.leadership import project_while_leading
from services.readmodels.service import build_read_models

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
log = structlog.get_logger(__name__)


def main() -> None:
    # As in the server: signals are taken by sigwait, never by a handler.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    config = load_config("sessionstore-worker")
    configure_logging(config)
    warn_of_unread_variables(os.environ)
    try:
        events = build_events(config, read_models=True)
        models = build_read_models(
            events,
            config.database_url,
            run_projection=True,
            migrate_first=config.migrate_at_start,
            poll_seconds=config.projection_poll_seconds,
            recall_index=config.recall_index,
        )
        retention = build_scheduled_retention(config, build_sessions(config, events), models)
        metrics = serve_worker_metrics(
            config, models, None if retention is None else retention.scheduler
        )
    except START_ERRORS as error:
        # As the server says it: one line, no traceback, no worker.
        reason, database = start_refusal(error), redacted(config.database_url)
        log.error("cannot start", reason=reason, database=database)
        sys.exit(1)
    stopping = threading.Event()
    leadership = threading.Thread(
        target=project_while_leading, args=(models, stopping), name="leadership"
    )
    if retention is None:
        log.info("retention: no policy file (SESSIONSTORE_RETENTION_FILE), nothing removed")
    else:
        retention.start()
    leadership.start()
    received = signal.sigwait(STOP_SIGNALS)
    log.info("stopping", signal=signal.Signals(received).name)
    stopping.set()
    if retention is not None:
        retention.close()  # a run under way ends first
    leadership.join()
    models.close()
    events.close()
    if metrics is not None:
        metrics.close()


if __name__ == "__main__":
    main()
