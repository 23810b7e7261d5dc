"""`sessionstore`: the session store's gRPC API as a command line, for people.

Each command makes one or two calls and prints the answer as aligned, compact
text. `--json` (before or after the command name) prints the API's own
responses instead (one JSON object per line for event streams), for scripts.
Failures print one line on stderr (a JSON object with `--json`) and exit 1 when
the server refused the request, 2 when the server could not be reached.

    sessionstore create --title "bug triage"
    sessionstore append SESSION --role user "why does the build fail?"
    sessionstore log SESSION
    sessionstore events SESSION --follow

This module holds the command group; each command lives in the module of its
group (sessions, entries, views, events, compaction, context, system_prompt).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from sessionstore_client.errors import SessionStoreError

from services.cli.audit import COMMANDS as AUDIT_COMMANDS
from services.cli.client import (
    DEFAULT_ADDRESS,
    DEFAULT_TIMEOUT_SECONDS,
    Client,
    Refused,
    Security,
    report,
)
from services.cli.compaction import compact, overflow, prune
from services.cli.context import context, status, usage
from services.cli.entries import append, show_entry
from services.cli.erase import erase
from services.cli.events import events
from services.cli.options import json_option
from services.cli.output import print_json
from services.cli.recall import recall
from services.cli.retention import retention
from services.cli.sessions import create, list_sessions, settings, show
from services.cli.system_prompt import system_prompt
from services.cli.tokens import token_group
from services.cli.transfer import COMMANDS as TRANSFER_COMMANDS
from services.cli.undo import undo_compaction
from services.cli.views import log, prompt, replay

__all__ = ["cli", "main"]

EXIT_USAGE = 2


class _Cli(click.Group):
    """Gives every command `--json`, and turns a failure into a report and an exit code.

    A refused or failed call, or with --json a usage mistake, is reported on
    stderr (as text, or as one JSON object with --json), never as a traceback.
    """

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        _give_json_option(cmd)
        super().add_command(cmd, name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Remembered for usage errors, which can come before --json is parsed.
        options = args[: args.index("--")] if "--" in args else args
        ctx.meta["json_asked"] = "--json" in options
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (SessionStoreError, Refused, click.UsageError) as error:
            client = ctx.obj if isinstance(ctx.obj, Client) else None
            as_json = bool(ctx.meta.get("json_asked") or (client and client.as_json))
            if not isinstance(error, click.UsageError):
                raise click.exceptions.Exit(report(error, client, as_json)) from None
            if not as_json:
                raise
            usage = {"code": "USAGE", "message": error.format_message()}
            print_json({"error": usage}, one_line=True, err=True)
            raise click.exceptions.Exit(EXIT_USAGE) from None


def _give_json_option(cmd: click.Command) -> None:
    """`--json` after the name of every command, those of a group (audit, readmodels,
    retention, token) included: the group's own option would only be taken before
    the subcommand's name."""
    cmd.params.append(json_option())
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _give_json_option(sub)


@click.group(cls=_Cli)
@click.option(
    "--address",
    envvar="SESSIONSTORE_ADDRESS",
    show_envvar=True,
    default=DEFAULT_ADDRESS,
    show_default=True,
    help="host:port of the server.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the API's responses as JSON.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    help=f"Seconds to wait for each answer [default: {DEFAULT_TIMEOUT_SECONDS:g}; for "
    "`compact`, long enough for each model step of the session's summariser chain].",
)
@click.option(
    "--token",
    envvar="SESSIONSTORE_TOKEN",
    show_envvar=True,
    default="",
    help="Bearer token, for a server with a tokens file (prefer the variable: "
    "options show in process lists).",
)
@click.option(
    "--ca-file",
    envvar="SESSIONSTORE_CA_FILE",
    show_envvar=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Connect over TLS, trusting these PEM CA certificates.",
)
@click.option(
    "--cert-file",
    envvar="SESSIONSTORE_CERT_FILE",
    show_envvar=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM client certificate, for a server that requires mutual TLS.",
)
@click.option(
    "--key-file",
    envvar="SESSIONSTORE_KEY_FILE",
    show_envvar=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM private key of --cert-file.",
)
@click.pass_context
def cli(
    ctx: click.Context,
    address: str,
    as_json: bool,
    timeout: float | None,
    token: str,
    ca_file: Path | None,
    cert_file: Path | None,
    key_file: Path | None,
) -> None:
    """Read and write the sessions of a session store server."""
    if (cert_file is None) != (key_file is None):
        raise click.UsageError("give --cert-file and --key-file together")
    client = Client(
        address,
        DEFAULT_TIMEOUT_SECONDS if timeout is None else timeout,
        as_json,
        Security(token, ca_file, cert_file, key_file),
        timeout_given=timeout is not None,
    )
    ctx.obj = client
    ctx.call_on_close(client.close)


for _command in (
    create,
    list_sessions,
    show,
    settings,
    append,
    show_entry,
    log,
    prompt,
    replay,
    events,
    compact,
    prune,
    overflow,
    system_prompt,
    status,
    context,
    usage,
    *TRANSFER_COMMANDS,
    *AUDIT_COMMANDS,
    undo_compaction,
    token_group,
    erase,
    recall,
    retention,
):
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="sessionstore")


if __name__ == "__main__":
    main()
