"""Logging for the server and worker processes: structured lines on stderr, as JSON
(SESSIONSTORE_LOG_FORMAT=json) or for a console, at the configured level.

A condition that persists (the database down, a read model failing) is logged
when it starts and when it ends, never once per attempt: see ``StateLog``.

Each line carries what the code bound where it was made (a call's request id
and session id, bound by the gRPC server's observing layer) and, inside a traced call, the
trace and span ids. The libraries' own records (the standard ``logging``
module) are rendered the same way, so a JSON log holds nothing but JSON lines.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Mapping
from typing import Any

import structlog
from opentelemetry import trace

from services.config import Config, unread_variables


def configure_logging(config: Config) -> None:
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if config.log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    level = logging.getLevelName(config.log_level.upper())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        add_trace_ids,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"),
    ]
    # The libraries' records: the same fields, the same renderer.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # While the database is down the pool retries every half second per
    # connection and warns each time; the database monitor says it once.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def warn_of_unread_variables(environ: Mapping[str, str]) -> None:
    """A warning for each SESSIONSTORE_* variable no setting reads (a misspelt name
    would otherwise leave its setting at the default without a word)."""
    for variable, closest in unread_variables(environ).items():
        structlog.get_logger(__name__).warning(
            "variable ignored: no setting has its name", variable=variable, did_you_mean=closest
        )


def add_trace_ids(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """The current span's trace and span ids, when a sampled trace is in progress."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", format(context.trace_id, "032x"))
        event.setdefault("span_id", format(context.span_id, "016x"))
    return event


class StateLog:
    """Logs a condition when it starts and when it ends, however often it is seen
    meanwhile: a database that stays down is one warning and one recovery, not a
    line per retry."""

    def __init__(self, logger: Any, failing: str, recovered: str) -> None:
        self._log = logger
        self._failing = failing
        self._recovered = recovered
        self._error = ""
        self._lock = threading.Lock()

    @property
    def failing(self) -> bool:
        return bool(self._error)

    def failed(self, error: str, **fields: Any) -> None:
        with self._lock:
            first = not self._error
            self._error = error or "failed"
        if first:
            self._log.warning(self._failing, error=error, **fields)

    def ok(self, **fields: Any) -> None:
        with self._lock:
            was = self._error
            self._error = ""
        if was:
            self._log.info(self._recovered, **fields)
