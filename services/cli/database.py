"""`migrate`, `rebuild` and `readmodels`: upkeep of the read models, straight on the
database.

These connect to SESSIONSTORE_DATABASE_URL (or --database-url) themselves,
not to a server: a migration runs before any server may start, and a
rebuild is an operator's repair. Only `migrate` creates or migrates tables:
the others refuse a store not at this release in one line naming it, whatever
SESSIONSTORE_MIGRATE_AT_START says, as servers of the release before may still
serve the store.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from services.cli.client import Client
from services.cli.output import print_json
from services.config import DEFAULT_DATABASE_URL, Config, sqlite_file

F = TypeVar("F", bound=Callable[..., Any])
# The recall index is a read model only where SESSIONSTORE_RECALL_INDEX turns it on.
MODELS = ("catalog", "compactions", "prunes", "recall")


def _stored(ctx: click.Context, param: click.Parameter, database_url: str) -> str:
    """The URL of a store that exists: a SQLite file that is not there would be made,
    empty, and read as a store of no sessions (the default path is relative, so a
    command run from another folder would do just that)."""
    file = sqlite_file(database_url)
    if file is not None and not file.exists():
        raise click.BadParameter(
            f"no database at {file.resolve()}: run this where the server "
            "runs, or name the store's database with --database-url or "
            "SESSIONSTORE_DATABASE_URL",
            ctx,
            param,
        )
    return database_url


def _database_url_option(*, must_exist: bool) -> Callable[[F], F]:
    return click.option(
        "--database-url",
        envvar="SESSIONSTORE_DATABASE_URL",
        default=DEFAULT_DATABASE_URL,
        show_default=True,
        callback=_stored if must_exist else None,
        help="The store's database (default: $SESSIONSTORE_DATABASE_URL).",
    )


def says_database_errors(command: F) -> F:
    """The command, reporting a database it cannot use (refused, missing, a URL of
    another kind) in one line and exit code 1, as the server does, not with a
    traceback."""

    @functools.wraps(command)
    def reporting(*args: Any, **kwargs: Any) -> Any:
        from services.adapters.start_errors import START_ERRORS, start_refusal

        try:
            return command(*args, **kwargs)
        except START_ERRORS as error:
            raise click.ClickException(start_refusal(error)) from None

    return cast(F, reporting)


# A migration may make the store's database; every other command reads one that exists.
DATABASE_URL = _database_url_option(must_exist=True)
NEW_OR_STORED_DATABASE_URL = _database_url_option(must_exist=False)


@click.command()
@NEW_OR_STORED_DATABASE_URL
@click.option(
    "--check",
    is_flag=True,
    help="Migrate and create nothing: exit 0 when the store is at this release (its "
    "tables made, the read models at the latest migration, none of their tables "
    "dropped since), 1 when not.",
)
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=0,
    metavar="SECONDS",
    help="With --check: check again until then (for servers that wait for a migration "
    "job, a database not up yet included).",
)
@click.option(
    "--stamp",
    metavar="REVISION",
    help="Record REVISION as the read models' migration before migrating, for tables "
    "whose recorded version was lost and whose schema matches no revision exactly; "
    "nothing is recorded if the migrations after it leave them unlike the latest.",
)
@says_database_errors
def migrate(database_url: str, check: bool, wait: float, stamp: str | None) -> None:
    """Create the event store's tables and apply the read models' schema migrations
    (safe to run from several replicas); make again the read models' tables dropped
    since, rebuilt from the events. A missing event log table is refused: restore it
    from a backup. Read model tables whose migration version was lost (its table
    dropped or emptied) get the revision their schema matches, or --stamp's."""
    from services.readmodels.admin import migrate_database, wait_until_migrated

    if check and stamp is not None:
        raise click.UsageError("--stamp records a revision: not with --check")
    if check:
        # A check reads the store: it must not make the SQLite file it checks, which
        # every later command would then read as a store of no sessions.
        file = sqlite_file(database_url)
        if file is not None and not _appears(file, wait):
            click.echo(
                f"store not migrated: no database at {file.resolve()} (name the "
                "store's database with --database-url or SESSIONSTORE_DATABASE_URL)",
                err=True,
            )
            raise click.exceptions.Exit(1)
        behind = wait_until_migrated(database_url, wait)
        if behind:
            click.echo(f"store not migrated: {behind}", err=True)
            raise click.exceptions.Exit(1)
        click.echo("read models at the latest migration")
        return
    if wait:
        raise click.UsageError("--wait goes with --check")
    migration = migrate_database(database_url, stamp)
    if migration.recorded is not None:
        click.echo(migration.recorded.describe())
    click.echo("read models migrated")
    if migration.remade is not None:
        missing = ", ".join(o.name for o in migration.remade.named())
        click.echo(f"made again (missing: {missing}): {', '.join(migration.remade.tables)}")
    for model in migration.rebuilt:
        click.echo(
            f"{model.name} rebuilt: {model.applied:,} events applied, at position {model.position}"
        )
    for name in migration.left:
        click.echo(
            f"{name} emptied, not rebuilt here (SESSIONSTORE_RECALL_INDEX is off where this "
            "runs): the servers or worker that keep it rebuild it from the first event"
        )


def _appears(file: Path, seconds: float) -> bool:
    """Whether ``file`` exists, or comes to within ``seconds`` (a migration job
    that makes it)."""
    give_up_at = time.monotonic() + seconds
    while not file.exists():
        left = give_up_at - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(1.0, left))
    return True


@click.command()
@click.argument("name", type=click.Choice(MODELS))
@DATABASE_URL
@says_database_errors
def rebuild(name: str, database_url: str) -> None:
    """Drop read model NAME's rows and rebuild it from the first event (recall: with
    SESSIONSTORE_RECALL_INDEX=true, as the servers run)."""
    from services.readmodels.admin import rebuild_read_model

    _refuse_recall_when_off([name], database_url)
    applied, position = rebuild_read_model(database_url, name)
    click.echo(f"{name} rebuilt: {applied:,} events applied, at position {position}")


@click.group("readmodels")
def readmodels() -> None:
    """The read models' progress, and the events they quarantined."""


@readmodels.command("status")
@DATABASE_URL
@click.pass_context
@says_database_errors
def status(ctx: click.Context, database_url: str) -> None:
    """Each read model's position and lag behind the store, and the events it
    could not apply (quarantined: skipped, kept to retry)."""
    from services.readmodels.admin import read_model_status

    statuses, quarantined = read_model_status(database_url)
    if _as_json(ctx):
        print_json(
            {
                "models": [{**asdict(s), "lag": s.lag} for s in statuses],
                "quarantined": [asdict(q) for q in quarantined],
            }
        )
        return
    click.echo(f"{'model':<12} {'position':>10} {'lag':>8} {'quarantined':>12}")
    for s in statuses:
        click.echo(f"{s.name:<12} {s.position:>10,} {s.lag:>8,} {s.quarantined:>12,}")
    if quarantined:
        click.echo("\nquarantined events (apply them again after a fix: readmodels retry):")
    for q in quarantined:
        click.echo(
            f"  {q.model} #{q.position}  {_time(q.recorded_us)}  session {q.session_id}  "
            f"{q.topic.rpartition('.')[2]}  attempts {q.attempts}\n    {q.error}"
        )


@readmodels.command("retry")
@click.argument("names", nargs=-1, type=click.Choice(MODELS))
@DATABASE_URL
@click.pass_context
@says_database_errors
def retry(ctx: click.Context, names: tuple[str, ...], database_url: str) -> None:
    """Apply the quarantined events of the read models NAMES (all when none) again,
    after a fix: each session they belong to is projected again, in order. Exits 1
    when some still fail (they stay quarantined)."""
    from services.readmodels.admin import retry_quarantined

    _refuse_recall_when_off(names, database_url)
    result = retry_quarantined(database_url, names)
    if _as_json(ctx):
        print_json({**asdict(result), "still_failing": [asdict(q) for q in result.still_failing]})
    else:
        click.echo(
            f"{result.applied:,} quarantined events applied, {len(result.still_failing):,} "
            f"still failing ({result.sessions:,} sessions projected again)"
        )
        for q in result.still_failing:
            click.echo(f"  {q.model} #{q.position}  session {q.session_id}\n    {q.error}")
    if result.still_failing:
        raise click.exceptions.Exit(1)


def _refuse_recall_when_off(names: Sequence[str], database_url: str) -> None:
    """An index built here while the servers keep none would never apply a later
    erasure: the erased text would stay unsealed in its tables."""
    if "recall" in names and not Config(database_url=database_url).recall_index:
        raise click.ClickException(
            "the recall index is off: set SESSIONSTORE_RECALL_INDEX=true here, as the "
            "servers (and the worker) run with it, to rebuild or retry it"
        )


def _as_json(ctx: click.Context) -> bool:
    client = ctx.find_object(Client)
    return bool(ctx.meta.get("json_asked") or (client is not None and client.as_json))


def _time(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
