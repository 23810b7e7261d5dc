"""The system prompt a client stores with its session, in the parts seed 004 reports on.

Text, injected files (cut to a per-file limit, with their raw and injected
sizes and an OK / TRUNCATED / MISSING status), skills, and tools with their
JSON schemas. The store renders it at the head of every prompt view, so the
view is the whole request, and the context report can say what each part costs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from domain.content import renderable_json
from domain.errors import InvalidRequest, quoted

MAX_TOOLS = 512
MAX_FILES = 256
# A tool name every provider takes: OpenAI's and Anthropic's [a-zA-Z0-9_-]{1,64},
# begun as Gemini's must be (a letter or an underscore).
TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


class FileStatus(StrEnum):
    OK = "ok"
    TRUNCATED = "truncated"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class InjectedFile:
    path: str
    # What goes into the prompt: the file, cut to the session's per-file limit.
    content: str
    raw_chars: int
    status: FileStatus

    @property
    def injected_chars(self) -> int:
        return len(self.content)


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str = ""
    # The tool's parameters as a JSON Schema object.
    parameters_json: str = "{}"

    def parameters(self) -> dict[str, Any]:
        parameters: dict[str, Any] = json.loads(self.parameters_json)
        return parameters


@dataclass(frozen=True, slots=True)
class PartTokens:
    """Tokens of each part, counted once when the prompt is set (seed 004's breakdown)."""

    text: int = 0
    files: int = 0
    skills: int = 0
    tool_list: int = 0
    tool_schemas: int = 0
    tokenizer: str = ""

    @property
    def total(self) -> int:
        return self.text + self.files + self.skills + self.tool_schemas


@dataclass(frozen=True, slots=True)
class SystemPrompt:
    text: str = ""
    files: tuple[InjectedFile, ...] = ()
    skills: tuple[Skill, ...] = ()
    tools: tuple[Tool, ...] = ()
    tokens: PartTokens = PartTokens()

    def is_empty(self) -> bool:
        return not (self.text or self.files or self.skills or self.tools)

    def rendered_text(self) -> str:
        """The system message: the text, then each injected file, then the skills."""
        parts = [self.text] if self.text else []
        for file in self.files:
            if file.status is not FileStatus.MISSING:
                parts.append(f"## {file.path}\n\n{file.content}")
        if self.skills:
            lines = [
                f"- {s.name}: {s.description}" if s.description else f"- {s.name}"
                for s in self.skills
            ]
            parts.append("## Skills\n\n" + "\n".join(lines))
        return "\n\n".join(parts)

    def tool_list_text(self) -> str:
        """The tools as a reader sees them listed: name and description, one a line."""
        return "\n".join(f"{t.name}: {t.description}" for t in self.tools)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "files": [[f.path, f.content, f.raw_chars, f.status.value] for f in self.files],
            "skills": [[s.name, s.description] for s in self.skills],
            "tools": [[t.name, t.description, t.parameters_json] for t in self.tools],
            "tokens": [
                self.tokens.text,
                self.tokens.files,
                self.tokens.skills,
                self.tokens.tool_list,
                self.tokens.tool_schemas,
                self.tokens.tokenizer,
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SystemPrompt:
        return cls(
            data["text"],
            tuple(InjectedFile(p, c, n, FileStatus(s)) for p, c, n, s in data["files"]),
            tuple(Skill(*s) for s in data["skills"]),
            tuple(Tool(*t) for t in data["tools"]),
            PartTokens(*data["tokens"]),
        )


def inject_file(path: str, content: str | None, max_chars: int) -> InjectedFile:
    """A file as it goes into the prompt: None content means the client could not read it."""
    if not path:
        raise InvalidRequest("every injected file needs a path")
    if content is None:
        return InjectedFile(path, "", 0, FileStatus.MISSING)
    if len(content) > max_chars:
        cut = content[:max_chars] + f"\n[... truncated: {len(content) - max_chars:,} more chars]"
        return InjectedFile(path, cut, len(content), FileStatus.TRUNCATED)
    return InjectedFile(path, content, len(content), FileStatus.OK)


def with_files_cut(prompt: SystemPrompt, max_chars: int) -> SystemPrompt:
    """The prompt with each injected file cut to ``max_chars`` (the session's setting)."""
    files = tuple(
        inject_file(f.path, None if f.status is FileStatus.MISSING else f.content, max_chars)
        for f in prompt.files
    )
    return replace(prompt, files=files)


def validate_system_prompt(prompt: SystemPrompt) -> None:
    if len(prompt.tools) > MAX_TOOLS:
        raise InvalidRequest(f"{len(prompt.tools)} tools; send at most {MAX_TOOLS}")
    if len(prompt.files) > MAX_FILES:
        raise InvalidRequest(f"{len(prompt.files)} files; send at most {MAX_FILES}")
    names: set[str] = set()
    for index, tool in enumerate(prompt.tools):
        if not tool.name:
            raise InvalidRequest(f"tools[{index}] needs a name")
        if not TOOL_NAME.fullmatch(tool.name):
            raise InvalidRequest(
                f"tools[{index}]: tool name {quoted(tool.name)} is not one every provider "
                "takes: use letters, digits, '_' and '-', at most 64, beginning with a letter "
                "or '_'"
            )
        if tool.name in names:
            raise InvalidRequest(f"tools[{index}]: tool {quoted(tool.name)} is listed twice")
        names.add(tool.name)
        try:
            schema = renderable_json(tool.parameters_json)
        except ValueError as error:
            raise InvalidRequest(
                f"tools[{index}] ({quoted(tool.name)}): parameters_json is not valid JSON "
                f"({quoted(str(error), 300)})"
            ) from None
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            raise InvalidRequest(
                f"tools[{index}] ({quoted(tool.name)}): parameters_json must be a JSON Schema "
                'of an object ({"type": "object", "properties": {...}}): providers take a '
                "tool's arguments as one"
            )
    for index, skill in enumerate(prompt.skills):
        if not skill.name:
            raise InvalidRequest(f"skills[{index}] needs a name")


def with_object_schemas(prompt: SystemPrompt) -> SystemPrompt:
    """The prompt with each tool's schema saying it is an object: Anthropic refuses an
    input_schema without ``"type": "object"`` (an empty schema, a tool without
    arguments). Checked by validate_system_prompt first."""
    tools = []
    for tool in prompt.tools:
        schema = tool.parameters()
        if "type" not in schema:
            schema = {"type": "object", "properties": {}, **schema}
            tool = replace(tool, parameters_json=json.dumps(schema, separators=(",", ":")))
        tools.append(tool)
    return replace(prompt, tools=tuple(tools))


def tools_by_schema_size(tools: Sequence[Tool]) -> list[Tool]:
    return sorted(tools, key=lambda t: (-len(t.parameters_json), t.name))
