"""`system-prompt`: store the client's system prompt (text, injected files, skills, tools).

Every prompt view from then on leads with it, and `context list` reports on its
parts. Files are read here and sent with their content; one that cannot be read
is sent as missing, so the report says MISSING instead of the command failing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from sessionstore_client import (
    FileStatus,
    InjectedFile,
    Skill,
    SystemPrompt,
    SystemPromptTokens,
    Tool,
)

from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.options import expected_version_option, read_text

FILE_STATUSES = {
    FileStatus.OK: "OK",
    FileStatus.TRUNCATED: "TRUNCATED",
    FileStatus.MISSING: "MISSING",
}


@click.command("system-prompt")
@click.argument("session")
@click.option("--text", help='The prompt\'s own text; "-" reads standard input.')
@click.option(
    "--file",
    "files",
    multiple=True,
    metavar="PATH",
    help="A file to inject (repeatable); one that cannot be read is reported MISSING.",
)
@click.option(
    "--skill",
    "skills",
    multiple=True,
    metavar="NAME[:DESCRIPTION]",
    help="A skill the agent has (repeatable).",
)
@click.option(
    "--tools",
    "tools_file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE.json",
    help="A JSON array of tools, in OpenAI function or Anthropic tool shape.",
)
@expected_version_option
@pass_client
def system_prompt(
    client: Client,
    session: str,
    text: str | None,
    files: tuple[str, ...],
    skills: tuple[str, ...],
    tools_file: Path | None,
    expected_version: int | None,
) -> None:
    """Set the session's system prompt.

    The whole prompt is replaced: parts not given are left out of it. Setting
    the same prompt again records nothing.

    \b
      system-prompt S --text "You are a careful coder." --file AGENTS.md
      system-prompt S --skill pdf:"Read PDF files" --tools tools.json
    """
    prompt = SystemPrompt(
        text=read_text(text) or "",
        files=[_injected_file(path) for path in files],
        skills=[_skill(given) for given in skills],
        tools=_tools(tools_file) if tools_file is not None else [],
    )
    response = client.api.set_system_prompt(
        session, system_prompt=prompt, expected_version=expected_version
    )
    if client.as_json:
        return output.print_json(response)
    stored = response.system_prompt or SystemPrompt()
    if response.changed:
        click.echo(f"system prompt set at version {response.version}")
    else:
        click.echo(f"system prompt unchanged (version {response.version}): nothing recorded")
    tokens = stored.tokens or SystemPromptTokens()
    rows = [
        ["text", f"{len(stored.text):,} chars", f"{tokens.text:,} tokens"],
        ["files", output.count(len(stored.files), "file"), f"{tokens.files:,} tokens"],
        ["skills", output.count(len(stored.skills), "skill"), f"{tokens.skills:,} tokens"],
        ["tool list", output.count(len(stored.tools), "tool"), f"{tokens.tool_list:,} tokens"],
        ["tool schemas", "", f"{tokens.tool_schemas:,} tokens"],
        ["total", "", f"{tokens.total:,} tokens ({tokens.tokenizer})"],
    ]
    for line in output.table(rows, right={1}):
        click.echo("  " + line)
    for line in file_rows(stored.files):
        click.echo("  " + line)


def file_rows(files: Any) -> list[str]:
    """`path  STATUS  raw N chars  injected M chars` lines for injected files."""
    rows = [
        [
            f.path,
            FILE_STATUSES.get(f.status, "?"),
            f"{f.raw_chars:,} raw",
            f"{f.injected_chars:,} injected chars",
        ]
        for f in files
    ]
    return output.table(rows, right={2})


def _injected_file(path: str) -> InjectedFile:
    try:
        content = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return InjectedFile(path=path, missing=True)
    return InjectedFile(path=path, content=content)


def _skill(given: str) -> Skill:
    name, _, description = given.partition(":")
    if not name.strip():
        raise click.BadParameter(f"{given!r} has no skill name", param_hint="--skill")
    return Skill(name=name.strip(), description=description.strip())


def _tools(path: Path) -> list[Tool]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise click.BadParameter(f"cannot read {path} ({error})", param_hint="--tools") from None
    except ValueError as error:
        raise click.BadParameter(f"{path} is not JSON ({error})", param_hint="--tools") from None
    if not isinstance(data, list):
        raise click.BadParameter(f"{path} must hold a JSON array of tools", param_hint="--tools")
    return [_tool(item, index, path) for index, item in enumerate(data)]


def _tool(item: Any, index: int, path: Path) -> Tool:
    """A tool in OpenAI's shape ({"type": "function", "function": {...}} or the inner
    object, with `parameters`) or Anthropic's (with `input_schema`)."""
    if isinstance(item, dict) and isinstance(item.get("function"), dict):
        item = item["function"]
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise click.BadParameter(
            f"tool {index} in {path} has no name; expected OpenAI "
            '{"type": "function", "function": {"name", "description", "parameters"}} '
            'or Anthropic {"name", "description", "input_schema"}',
            param_hint="--tools",
        )
    schema = item.get("parameters", item.get("input_schema", {}))
    if not isinstance(schema, dict):
        raise click.BadParameter(
            f"tool {item['name']!r} in {path}: its parameters must be a JSON Schema object",
            param_hint="--tools",
        )
    return Tool(
        name=item["name"],
        description=str(item.get("description") or ""),
        parameters_json=json.dumps(schema, ensure_ascii=False),
    )
