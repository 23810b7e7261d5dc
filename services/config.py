"""Server configuration: one settings object, read from SESSIONSTORE_* variables."""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlparse

from pydantic import Field, PositiveInt, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from domain.errors import DomainError
from domain.settings import SessionSettings

ENV_PREFIX = "SESSIONSTORE_"
DEFAULT_DATABASE_URL = "sqlite:///data/sessionstore.db"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# gRPC counts a message's bytes in a signed 32-bit integer, and an answer may be
# 2 MiB larger than the largest request (services.grpc.server): both must fit.
MAX_MESSAGE_MB = 2045
# Bounds that keep a mistyped figure from hanging a loop for ever or overflowing
# a date: no poll waits longer than an hour, no key is kept beyond a year, and
# retention runs at least once a week.
MAX_POLL_SECONDS = 3600.0
MAX_IDEMPOTENCY_TTL_SECONDS = 365 * 24 * 3600.0
MAX_RETENTION_INTERVAL_SECONDS = 7 * 24 * 3600.0
# SESSIONSTORE_* variables that other programs read from the same environment:
# the client and the CLI, the Compose file, and the test and bench suites.
READ_ELSEWHERE = frozenset(
    {"TOKEN", "CA_FILE", "CERT_FILE", "KEY_FILE", "SERVICE_CONFIG_FILE", "TOKENS", "PUBLISH"}
)
READ_ELSEWHERE_PREFIXES = ("TEST_", "BENCH_", "FUZZ_")


class Config(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True)

    address: str = Field("127.0.0.1:50051", description="host:port the gRPC server listens on")
    health_address: str | None = Field(
        None,
        description="host:port of a second listener, always plain text, that serves only the "
        "gRPC health service: for probes that cannot speak TLS (Kubernetes' grpc probes); "
        "unset: health is served on the address alone",
    )
    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="sqlite:///relative/or/absolute.db, or postgresql://user:pass@host:port/db"
        "?schema=name",
    )
    default_model: str = Field("gpt-4o", description="model of sessions created without one")
    max_entry_bytes: int = Field(1 << 20, gt=0, description="default size limit of one entry")
    model_windows: dict[str, PositiveInt] = Field(
        default_factory=dict,
        description='context windows by model (the "models config"), as JSON',
    )
    session_defaults: dict[str, Any] = Field(
        default_factory=dict,
        description="server-wide defaults of new sessions' settings, as JSON in the settings' "
        'shape, e.g. {"compaction": {"threshold_ratio": 0.7}, "pruning": {"mode": "cache-ttl"}}',
    )
    compaction_workers: int = Field(
        4, gt=0, description="compactions that run at once (of different sessions)"
    )
    snapshot_interval: int = Field(100, gt=0, description="events between aggregate snapshots")
    recall_index: bool = Field(
        False,
        description="keep the recall index and answer Recall: entries' text, unsealed, in "
        "the read models' tables until erased; off: content stays sealed at rest",
    )
    cache_max_mb: int = Field(
        512,
        gt=0,
        description="memory for cached sessions: their histories and rendered prompts, "
        "(a sixth) their aggregates and (a 16th) their tenants and latest saved versions",
    )
    max_workers: int = Field(32, gt=0, description="gRPC worker threads")
    max_followers: int = Field(
        1_000,
        gt=0,
        description="followed ReadEvents streams served at once (they wait on the event "
        "loop and hold no worker thread); the next is refused with RESOURCE_EXHAUSTED",
    )
    max_message_mb: int = Field(
        16,
        gt=0,
        le=MAX_MESSAGE_MB,
        description="largest gRPC message accepted (gRPC counts bytes in 32 bits)",
    )
    follow_poll_seconds: float = Field(
        1.0,
        gt=0,
        le=MAX_POLL_SECONDS,
        allow_inf_nan=False,
        description="how often a followed event stream looks for writes of other servers",
    )
    idempotency_ttl_seconds: float = Field(
        24 * 3600.0,
        gt=0,
        le=MAX_IDEMPOTENCY_TTL_SECONDS,
        allow_inf_nan=False,
        description="how long an append's idempotency key recognises a retry",
    )
    projections: Literal["inprocess", "worker", "off"] = Field(
        "inprocess",
        description="who keeps the SQL read models (catalog, audits) up to date: this server "
        "(inprocess), a sessionstore-worker process (worker), or nobody (off: ListSessions "
        "reads the event store, the audit RPCs are refused)",
    )
    migrate_at_start: bool = Field(
        True,
        description="create the event store's tables and apply the read models' migrations "
        "when the server or worker starts (under a lock); set false when `sessionstore "
        "migrate` runs as a deploy step: the process then creates no table, and refuses a "
        "store whose tables are missing or behind",
    )
    projection_poll_seconds: float = Field(
        0.2,
        gt=0,
        le=MAX_POLL_SECONDS,
        allow_inf_nan=False,
        description="how often the projection looks for new events when not woken (SQLite "
        "cannot notify; on PostgreSQL this is the fallback of LISTEN/NOTIFY)",
    )
    retention_file: Path | None = Field(
        None,
        description="TOML file of retention policies (per tenant and label: idle_days, "
        "max_age_days, erase or export-then-erase) the worker, or a server that keeps the "
        "read models itself (inprocess), applies on a schedule; unset or empty: no session "
        "is ever removed by retention",
    )
    retention_interval_seconds: float = Field(
        3600.0,
        gt=0,
        le=MAX_RETENTION_INTERVAL_SECONDS,
        allow_inf_nan=False,
        description="how often the leading worker or server applies the retention policies "
        "(it reads the file again each time)",
    )
    tokens_file: Path | None = Field(
        None,
        description="TOML file of the bearer tokens this server accepts, by SHA-256 only, each "
        "with a name, tenant and role (`sessionstore token new` prints an entry); unset: no "
        "authentication, and the server listens on loopback addresses only",
    )
    tls_cert_file: Path | None = Field(
        None, description="PEM certificate chain of the server; with tls_key_file, serves TLS"
    )
    tls_key_file: Path | None = Field(None, description="PEM private key of tls_cert_file")
    tls_client_ca_file: Path | None = Field(
        None,
        description="PEM CA certificates; when set, clients must present a certificate it "
        "signed (mutual TLS)",
    )
    allow_unauthenticated_remote: bool = Field(
        False,
        description="serve without tokens on an address other than loopback (anyone who "
        "reaches the port reads and writes every session): only behind a gateway that "
        "authenticates",
    )
    allow_tokens_without_tls: bool = Field(
        False,
        description="accept bearer tokens on an address other than loopback without TLS "
        "(anyone on the path reads them): only where a proxy in front terminates TLS",
    )
    providers_file: Path | None = Field(
        None,
        description="TOML file naming the providers summarising models are reached through "
        "(api base, and the variable or file holding the key), referred to by name in "
        "sessions' compaction.summarizers (model@name); keys never enter settings or events",
    )
    reflection: bool = Field(True, description="serve gRPC server reflection")
    metrics_address: str | None = Field(
        None,
        description="host:port where Prometheus metrics are served over HTTP at /metrics "
        "(e.g. 0.0.0.0:9464); unset: no metrics",
    )
    log_format: Literal["console", "json"] = Field(
        "console",
        description="console (for a person) or json (one object a line, for a log collector)",
    )
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, level: str) -> str:
        if level.upper() not in LOG_LEVELS:
            raise ValueError(f"{level!r} is not a log level; use one of {', '.join(LOG_LEVELS)}")
        return level.upper()

    @field_validator("address", "health_address", "metrics_address")
    @classmethod
    def _host_and_port(cls, address: str | None) -> str | None:
        if address is None:
            return None
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or int(port) > 65535:
            raise ValueError(
                f"{address!r} is not host:port; use e.g. 127.0.0.1:50051, [::1]:50051 or "
                "0.0.0.0:50051 (port 0 picks a free one)"
            )
        return address

    @model_validator(mode="after")
    def _tls_files_together(self) -> Config:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError(
                "set SESSIONSTORE_TLS_CERT_FILE and SESSIONSTORE_TLS_KEY_FILE together, or neither"
            )
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            raise ValueError(
                "SESSIONSTORE_TLS_CLIENT_CA_FILE (mutual TLS) needs TLS: set "
                "SESSIONSTORE_TLS_CERT_FILE and SESSIONSTORE_TLS_KEY_FILE"
            )
        return self

    @property
    def listens_on_loopback(self) -> bool:
        host = self.address.rpartition(":")[0].strip("[]")
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False  # a host name, which may resolve to any interface

    @field_validator("session_defaults")
    @classmethod
    def _valid_settings(cls, defaults: dict[str, Any]) -> dict[str, Any]:
        # Stored settings of another release may hold keys this one ignores;
        # an operator's defaults may not: a misspelt key would change nothing.
        if unknown := unknown_settings_keys(defaults):
            raise ValueError(f"unknown settings {', '.join(unknown)}")
        try:
            merged_settings(SessionSettings(), defaults).validate()
        except (TypeError, DomainError) as error:
            raise ValueError(f"not valid session settings: {error}") from None
        return defaults

    def new_session_settings(self) -> SessionSettings:
        """What a session is created with before the client's own choices."""
        base = SessionSettings(model=self.default_model, max_entry_bytes=self.max_entry_bytes)
        return merged_settings(base, self.session_defaults)

    def eventsourcing_env(self) -> dict[str, str]:
        """The eventsourcing library's settings for this database URL."""
        return persistence_env(self.database_url)


def load_config(program: str) -> Config:
    """The configuration from the environment, or the process ends with one line
    saying which SESSIONSTORE_* variable to fix."""
    try:
        return Config()
    except ValidationError as error:
        problems = [_described(problem) for problem in error.errors()]
    except SettingsError as error:
        # pydantic-settings names the field only in its message; JSON it could not read.
        field = re.search(r'field "(\w+)"', str(error))
        variable = f"{ENV_PREFIX}{field[1].upper()}" if field else "a SESSIONSTORE_* variable"
        problems = [f"{variable} is not valid JSON ({error.__cause__})"]
    sys.exit(f"{program}: invalid configuration: {'; '.join(problems)}")


def unread_variables(environ: Mapping[str, str]) -> dict[str, str | None]:
    """The SESSIONSTORE_* variables in ``environ`` that nothing of the store reads,
    each with the variable of the setting its name is closest to (None: none is).
    The settings ignore a variable they do not know, so a misspelt name would
    leave its setting at the default without a word."""
    settings = [name.upper() for name in Config.model_fields]
    unread: dict[str, str | None] = {}
    for variable in sorted(environ):
        upper = variable.upper()  # matched as the settings match them: whatever the case
        if not upper.startswith(ENV_PREFIX):
            continue
        name = upper.removeprefix(ENV_PREFIX)
        if name in settings or name in READ_ELSEWHERE or name.startswith(READ_ELSEWHERE_PREFIXES):
            continue
        closest = difflib.get_close_matches(name, settings, n=1)
        unread[variable] = f"{ENV_PREFIX}{closest[0]}" if closest else None
    return unread


def _described(problem: Any) -> str:
    location = [str(part) for part in problem["loc"]]
    message = problem["msg"].removeprefix("Value error, ")
    if not location:  # a rule across variables: its message names them
        return message
    variable = f"{ENV_PREFIX}{location[0].upper()}"
    within = "".join(f"[{part!r}]" for part in location[1:])
    shown = problem.get("input")
    # Never echo the database URL: it may hold a password.
    if location[0] != "database_url" and isinstance(shown, str | int | float):
        return f"{variable}{within}={shown!r}: {message}"
    return f"{variable}{within}: {message}"


def unknown_settings_keys(changes: dict[str, Any]) -> list[str]:
    """The keys of ``changes`` (settings' stored shape) that no setting has."""
    defaults = SessionSettings()
    known = defaults.to_dict()
    unknown = []
    for key, value in changes.items():
        if key not in known:
            unknown.append(key)
        elif isinstance(value, dict) and dataclasses.is_dataclass(getattr(defaults, key)):
            unknown += [f"{key}.{name}" for name in value if name not in known[key]]
    return unknown


def sqlite_file(database_url: str) -> Path | None:
    """The file of a SQLite database URL; None for SQLite in memory or another database."""
    if urlparse(database_url).scheme != "sqlite":
        return None
    path = database_url.removeprefix("sqlite://").removeprefix("/")
    return None if path == ":memory:" else Path(path).expanduser()


def persistence_env(database_url: str) -> dict[str, str]:
    url = urlparse(database_url)
    common = {"ORIGINATOR_ID_TYPE": "text", "CREATE_TABLE": "y"}
    if database_url == "memory:":
        return {**common, "PERSISTENCE_MODULE": "eventsourcing.popo"}
    if url.scheme == "sqlite":
        path = database_url.removeprefix("sqlite://").removeprefix("/")
        if (file := sqlite_file(database_url)) is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
        return {
            **common,
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": path,
            "SQLITE_LOCK_TIMEOUT": "10",
            "APPLICATION_RECORDER_TOPIC": "services.adapters.sqlite_recorder:SQLiteEventRecorder",
        }
    if url.scheme in ("postgres", "postgresql", "postgresql+psycopg"):
        query = parse_qs(url.query)
        return {
            **common,
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_HOST": url.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(url.port or 5432),
            "POSTGRES_DBNAME": url.path.lstrip("/") or "postgres",
            "POSTGRES_USER": unquote(url.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(url.password or ""),
            "POSTGRES_SCHEMA": query.get("schema", [""])[0],
            "POSTGRES_POOL_SIZE": query.get("pool_size", ["8"])[0],
            "POSTGRES_MAX_OVERFLOW": query.get("max_overflow", ["8"])[0],
            "POSTGRES_CONNECT_TIMEOUT": "10",
            "POSTGRES_LOCK_TIMEOUT": "10",
            "APPLICATION_RECORDER_TOPIC": (
                "services.adapters.postgres_recorder:PostgresEventRecorder"
            ),
        }
    raise ValueError(
        f"SESSIONSTORE_DATABASE_URL {database_url!r}: use sqlite:///path.db, "
        "postgresql://user:password@host:port/dbname, or memory: (nothing kept)"
    )


def merged_settings(base: SessionSettings, changes: dict[str, Any]) -> SessionSettings:
    """``base`` with ``changes`` (in the settings' stored shape) laid over it, policy by policy."""
    data = base.to_dict()
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return SessionSettings.from_dict(data)
