"""Logging for the server and worker processes: structured lines on stderr, as JSON or
for a console, at the configured level."""

from __future__ import annotations

import logging
import sys

import structlog

from services.config import Config


def configure_logging(config: Config) -> None:
    renderer = (
        structlog.processors.JSONRenderer()
        if config.log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr, format="%(message)s")
    # While the database is down the pool retries every half second per
    # connection and warns each time; the database monitor says it once.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelName(config.log_level.upper())
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
