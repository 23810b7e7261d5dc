"""`retention plan` and `retention apply`: the retention policies, straight on the database.

Like `migrate`, these connect to SESSIONSTORE_DATABASE_URL (or --database-url)
themselves: retention is an operator's task, and the worker applies the same
policies on its schedule. Neither migrates: a store not at this release is
refused in one line naming `sessionstore migrate`.

    sessionstore retention plan --policy-file retention.toml     # what would go, and why
    sessionstore retention plan --at 2027-01-01T00:00:00Z        # ... on that date
    sessionstore retention apply --policy-file retention.toml    # erase it now
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from services.cli import output
from services.cli.client import Client
from services.cli.database import DATABASE_URL, says_database_errors
from services.cli.options import Moment
from services.cli.output import print_json

if TYPE_CHECKING:
    from domain.retention import Verdict
    from services.app.retention import RetentionPlan

T = TypeVar("T")

POLICY_FILE = click.option(
    "--policy-file",
    envvar="SESSIONSTORE_RETENTION_FILE",
    show_envvar=True,
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The retention policies (TOML), as the worker reads them.",
)


@click.group("retention")
def retention() -> None:
    """Remove sessions as the retention policies say: idle or old, per tenant and label."""


@retention.command("plan")
@POLICY_FILE
@DATABASE_URL
@click.option(
    "--at",
    type=Moment(),
    help="Plan as of this time (ISO 8601) instead of now: what will be due then.",
)
@click.pass_context
@says_database_errors
def plan(ctx: click.Context, policy_file: Path, database_url: str, at: datetime | None) -> None:
    """List the sessions the policies would erase, and why; erase nothing."""
    from services.bootstrap import plan_retention

    found = _run(lambda: plan_retention(database_url, policy_file, at))
    if _as_json(ctx):
        print_json(_plan_json(found))
        return
    _print_plan(found)


@retention.command("apply")
@POLICY_FILE
@DATABASE_URL
@click.pass_context
@says_database_errors
def apply(ctx: click.Context, policy_file: Path, database_url: str) -> None:
    """Erase the sessions the policies make due now (exporting first where they say
    so). Exits 1 when a removal failed."""
    from services.bootstrap import apply_retention

    found, outcome = _run(lambda: apply_retention(database_url, policy_file))
    if _as_json(ctx):
        print_json(
            {
                "plan": _plan_json(found),
                "erased": outcome.erased,
                "exported": [str(p) for p in outcome.exported],
                "skipped": [{"session_id": s, "why": w} for s, w in outcome.skipped],
                "failed": [{"session_id": s, "why": w} for s, w in outcome.failed],
            }
        )
    else:
        _print_plan(found)
        click.echo(
            f"erased {output.count(len(outcome.erased), 'session')}, "
            f"wrote {output.count(len(outcome.exported), 'export')}, "
            f"left {len(outcome.skipped)} for a later run, {len(outcome.failed)} failed"
        )
        for path in outcome.exported:
            click.echo(f"  exported {path}")
        for session_id, why in outcome.skipped:
            click.echo(f"  left {session_id}: {why}")
        for session_id, why in outcome.failed:
            click.echo(f"  FAILED {session_id}: {why}")
    if outcome.failed:
        raise click.exceptions.Exit(1)


def _as_json(ctx: click.Context) -> bool:
    client = ctx.find_object(Client)
    return bool(ctx.meta.get("json_asked") or (client is not None and client.as_json))


def _run(work: Callable[[], T]) -> T:
    """The work's answer; a policy file it cannot read is reported, not raised."""
    from services.adapters.retention_file import RetentionFileError

    try:
        return work()
    except RetentionFileError as error:
        raise click.ClickException(str(error)) from None


def _plan_json(found: RetentionPlan) -> dict[str, Any]:
    def one(verdict: Verdict) -> dict[str, Any]:
        return {
            "session_id": verdict.session.session_id,
            "tenant": verdict.session.tenant,
            "version": verdict.session.version,
            "policy": verdict.policy.name if verdict.policy else "",
            "action": verdict.policy.action.value if verdict.policy else "",
            "reasons": list(verdict.reasons),
        }

    return {
        "at": found.at.isoformat(),
        "removals": [
            {**one(r.verdict), "forks": [one(f) for f in r.forks]} for r in found.removals
        ],
        "held": [{**one(h.verdict), "why": h.why} for h in found.held],
    }


def _print_plan(found: RetentionPlan) -> None:
    when = found.at.strftime("%Y-%m-%d %H:%M:%S %Z")
    click.echo(f"due at {when}: {output.count(found.session_count, 'session')}")
    for removal in found.removals:
        for n, verdict in enumerate(removal.sessions):
            policy = verdict.policy
            assert policy is not None  # a planned session has its deciding policy
            lead = "  " if n == 0 else "    with fork "
            click.echo(
                f"{lead}{verdict.session.session_id}  policy {policy.name} "
                f"({policy.action.value}): {'; '.join(verdict.reasons)}"
            )
    if found.held:
        click.echo(f"held back: {output.count(len(found.held), 'session')}")
    for held in found.held:
        click.echo(f"  {held.verdict.session.session_id}: {held.why}")
