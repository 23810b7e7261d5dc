"""Transfer commands: `import` a transcript file as a session, `export` a session
as a pi session file.

    sessionstore import ~/.pi/agent/sessions/.../2025-12-08_x.jsonl
    sessionstore import transcript.json --format openai --id support-42
    sessionstore export support-42 --version 12 -o support-42.jsonl
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import click
from sessionstore_client import SessionSettings

from services.cli import output
from services.cli.client import Client, pass_client

CHUNK_BYTES = 256 << 10
FORMATS = ("auto", "pi", "openclaw", "claude-code", "openai")


def _chunks(path: Path, progress: bool) -> Iterator[bytes]:
    total = path.stat().st_size
    sent = 0
    with path.open("rb") as file:
        while chunk := file.read(CHUNK_BYTES):
            sent += len(chunk)
            if progress:
                click.echo(f"\rsent {sent:,} of {total:,} bytes", nl=False, err=True)
            yield chunk
    if progress:
        click.echo(err=True)


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "file_format",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="The transcript's format; auto tells it from the file.",
)
@click.option("--id", "session_id", default="", help="The session's id; from the file if left out.")
@click.option("--model", help="The session's model, over the one the file names.")
@pass_client
def import_session(
    client: Client, file: Path, file_format: str, session_id: str, model: str | None
) -> None:
    """Import an agent transcript (pi, OpenClaw, Claude Code, OpenAI messages) as a session.

    A pi file that branches becomes one session for the branch that ends the file
    and a fork of it for every other branch."""
    progress = not client.as_json and sys.stderr.isatty()
    response = client.api.import_session(
        _chunks(file, progress),
        format=file_format,
        session_id=session_id,
        settings=SessionSettings(model=model),
        file_name=file.name,
        timeout=max(client.timeout, 300.0),
    )
    if client.as_json:
        return output.print_json(response)
    click.echo(f"imported {response.bytes:,} bytes ({response.format})")
    for imported in response.sessions:
        session = imported.session
        if session is None:
            continue
        fork = (
            f", fork of {session.parent_session_id} at version {session.forked_at_version}"
            if session.parent_session_id
            else ""
        )
        click.echo(
            f"{session.id}: version {session.version}, {imported.entries} entries, "
            f"{imported.compactions} compactions, {imported.abandoned_tool_calls} "
            f"abandoned tool calls{fork}"
        )


@click.command("export")
@click.argument("session")
@click.option(
    "--version", type=click.IntRange(min=1), help="Export the session as of this version."
)
@click.option(
    "-o",
    "--output",
    "target",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write to this file instead of standard output.",
)
@pass_client
def export_session(client: Client, session: str, version: int | None, target: Path | None) -> None:
    """Export a session as a pi session file (JSONL, version 3)."""
    chunks = client.api.export_session(
        session, version=version or 0, timeout=max(client.timeout, 300.0)
    )
    written = 0
    if target is None:
        for chunk in chunks:
            sys.stdout.buffer.write(chunk.data)
        sys.stdout.buffer.flush()
        return
    with target.open("wb") as file:
        for chunk in chunks:
            file.write(chunk.data)
            written += len(chunk.data)
    if client.as_json:
        return output.print_json({"session_id": session, "file": str(target), "bytes": written})
    click.echo(f"exported {session} to {target} ({written:,} bytes)")


COMMANDS = (import_session, export_session)
