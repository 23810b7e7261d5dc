"""Writes the client's generated modules from the API's .proto: `make proto` runs it.

* ``sessionstore_client/_types/``: one dataclass per message and one IntEnum
  per enum, with the .proto's comments as their documentation: a module per
  section of the .proto (the messages under one of its ``// ---- title``
  headings), and ``enums.py``; ``sessionstore_client/types.py`` imports them all;
* ``sessionstore_client/_methods/``: one method per RPC, for the synchronous
  client and for the asyncio one, taking the request's fields as arguments: a
  module per section that declares requests, gathered in its ``__init__.py``;
* ``sessionstore_client/_proto/``: the protobuf modules the client sends and
  reads, compiled from the same .proto (and from the client's own
  ``rpc_status.proto``).

Run from the repository's root: ``python clients/python/tools/generate.py [OUT]``
writes under OUT (default: the client's ``src``), so a check can compare a
fresh run with what is committed.

How messages map to Python: scalars to int, float, str, bool and bytes; an enum
field to its IntEnum; google.protobuf.Timestamp to an aware datetime; a message
field (and a proto3 ``optional`` scalar) to ``X | None``; repeated fields to
lists and maps to dicts. A oneof whose members are messages of distinct types
is one field typed as their union, named for the oneof; a message that is only
such a oneof (ContentBlock) is the union itself. Other oneofs are a field per
member, at most one of them set.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

PROTO = Path("proto/sessionstore/v1/session_store.proto")
CLIENT_SRC = Path("clients/python/src")
STATUS_PROTO = Path("sessionstore_client/_proto/rpc_status.proto")
PACKAGE = "sessionstore.v1"
TIMESTAMP = ".google.protobuf.Timestamp"
HEADER = (
    "# Generated from {} by clients/python/tools/generate.py.\n"
    "# DO NOT EDIT: `make proto` writes it.\n"
)
# RPCs whose session_id may be left empty (generated, or "all sessions").
SESSION_ID_OPTIONAL = {"CreateSession", "ListCompactions", "ListPrunes"}

_SCALARS = {
    F.TYPE_STRING: ("str", '""'),
    F.TYPE_BYTES: ("bytes", 'b""'),
    F.TYPE_BOOL: ("bool", "False"),
    F.TYPE_DOUBLE: ("float", "0.0"),
    F.TYPE_FLOAT: ("float", "0.0"),
}
_INTEGERS = {
    F.TYPE_INT32,
    F.TYPE_INT64,
    F.TYPE_UINT32,
    F.TYPE_UINT64,
    F.TYPE_SINT32,
    F.TYPE_SINT64,
    F.TYPE_FIXED32,
    F.TYPE_FIXED64,
    F.TYPE_SFIXED32,
    F.TYPE_SFIXED64,
}


@dataclass(frozen=True)
class Attribute:
    """One attribute of a generated dataclass."""

    name: str
    annotation: str
    default: str
    comment: str


@dataclass(frozen=True)
class Section:
    """The messages the .proto declares under one heading: a module of ``_types``."""

    module: str
    # The heading as written ("context management"); "" before the first heading.
    title: str
    messages: tuple[int, ...]

    @property
    def name(self) -> str:
        """The heading, else the module's name in words."""
        return self.title or self.module.replace("_", " ")

    @property
    def described(self) -> str:
        """Where the .proto has them: under its "views" heading, say."""
        if self.title:
            return f'under the .proto\'s "{self.title}" heading'
        return "before the .proto's first heading"


class Api:
    """The parsed .proto: its messages, enums and service, with their comments."""

    def __init__(self, file: descriptor_pb2.FileDescriptorProto) -> None:
        self.file = file
        self.comments = {
            tuple(location.path): _uncommented(location.leading_comments)
            for location in file.source_code_info.location
            if location.leading_comments.strip()
        }
        self.messages = {m.name: m for m in file.message_type}
        self.enums = {e.name: e for e in file.enum_type}
        self.sections = self._sections()
        self.section_of = {
            file.message_type[index].name: section
            for section in self.sections
            for index in section.messages
        }

    def _sections(self) -> list[Section]:
        """The messages grouped by the .proto's headings, in its order.

        A heading is a comment standing alone, dashes then a title:
        ``// ------------ context management``. The messages before the first one
        are a section named for the first of them (AuditViewRequest: audit_view).
        """
        locations = {
            tuple(location.path): location for location in self.file.source_code_info.location
        }
        declared = [(5, index) for index in range(len(self.file.enum_type))]
        declared += [(4, index) for index in range(len(self.file.message_type))]
        declared.sort(key=lambda path: locations[path].span[0])
        groups: list[tuple[str, list[int]]] = []
        for kind, index in declared:
            detached = locations[(kind, index)].leading_detached_comments
            headings = [c.strip(" -\n") for c in detached if c.strip().startswith("---")]
            if headings or not groups:
                groups.append((headings[-1] if headings else "", []))
            if kind == 4:
                groups[-1][1].append(index)
        sections = []
        for title, messages in groups:
            if not messages:  # enums only: they are all in _types/enums.py
                continue
            if title:
                module = re.sub(r"\W+", "_", title).strip("_").lower()
            else:
                module = _snake(self.file.message_type[messages[0]].name).removesuffix("_request")
            sections.append(Section(module, title, tuple(messages)))
        modules = [s.module for s in sections] + ["enums"]
        if len(set(modules)) != len(modules):
            raise SystemExit(f"two sections of the .proto make one module: {modules}")
        return sections

    def type_name(self, reference: str) -> str:
        return reference.removeprefix(f".{PACKAGE}.")

    def map_entry(
        self, field: descriptor_pb2.FieldDescriptorProto
    ) -> descriptor_pb2.DescriptorProto | None:
        if field.type != F.TYPE_MESSAGE or field.label != F.LABEL_REPEATED:
            return None
        owner, _, nested = self.type_name(field.type_name).rpartition(".")
        if not owner:
            return None
        for candidate in self.messages[owner].nested_type:
            if candidate.name == nested and candidate.options.map_entry:
                return candidate
        return None

    def union_oneofs(self, message: descriptor_pb2.DescriptorProto) -> dict[int, list[str]]:
        """Oneof index -> member type names, for the oneofs shown as one union field."""
        unions = {}
        for index in range(len(message.oneof_decl)):
            members = [
                f for f in message.field if f.HasField("oneof_index") and f.oneof_index == index
            ]
            if any(f.proto3_optional for f in members):
                continue  # a proto3 `optional` field: a oneof of its own
            types = [self.type_name(f.type_name) for f in members]
            messages = all(f.type == F.TYPE_MESSAGE and f.type_name != TIMESTAMP for f in members)
            if messages and len(set(types)) == len(types):
                unions[index] = types
        return unions

    def alias(self, message: descriptor_pb2.DescriptorProto) -> list[str] | None:
        """The member types when the message is nothing but one union oneof."""
        unions = self.union_oneofs(message)
        if len(unions) == 1 and all(f.HasField("oneof_index") for f in message.field):
            return next(iter(unions.values()))
        return None

    def python_type(self, field: descriptor_pb2.FieldDescriptorProto) -> str:
        if field.type == F.TYPE_MESSAGE:
            if field.type_name == TIMESTAMP:
                return "datetime"
            return self.type_name(field.type_name)
        if field.type == F.TYPE_ENUM:
            return self.type_name(field.type_name)
        if field.type in _INTEGERS:
            return "int"
        return _SCALARS[field.type][0]

    def attributes(self, index: int) -> Iterator[Attribute]:
        message = self.file.message_type[index]
        unions = self.union_oneofs(message)
        done: set[int] = set()
        for number, field in enumerate(message.field):
            comment = self.comments.get((4, index, 2, number), "")
            in_union = field.HasField("oneof_index") and field.oneof_index in unions
            if in_union:
                if field.oneof_index in done:
                    continue
                done.add(field.oneof_index)
                name = message.oneof_decl[field.oneof_index].name
                members = " | ".join(unions[field.oneof_index])
                oneof_comment = self.comments.get((4, index, 8, field.oneof_index), "")
                yield Attribute(name, f"{members} | None", "None", oneof_comment)
                continue
            entry = self.map_entry(field)
            python = self.python_type(field)
            if entry is not None:
                key, value = (self.python_type(f) for f in entry.field)
                yield Attribute(
                    field.name, f"dict[{key}, {value}]", "field(default_factory=dict)", comment
                )
            elif field.label == F.LABEL_REPEATED:
                yield Attribute(
                    field.name, f"list[{python}]", "field(default_factory=list)", comment
                )
            elif (
                field.type == F.TYPE_MESSAGE
                or field.proto3_optional
                or field.HasField("oneof_index")
            ):
                yield Attribute(field.name, f"{python} | None", "None", comment)
            elif field.type == F.TYPE_ENUM:
                zero = self.enums[python].value[0].name
                yield Attribute(
                    field.name, python, f"{python}.{self.enum_member(python, zero)}", comment
                )
            else:
                yield Attribute(
                    field.name, python, _SCALARS.get(field.type, ("int", "0"))[1], comment
                )

    def enum_member(self, enum: str, value: str) -> str:
        return value.removeprefix(_enum_prefix(enum))


def _uncommented(text: str) -> str:
    """A comment's text without the space each line has after the slashes."""
    return "\n".join(line.removeprefix(" ") for line in text.strip("\n").splitlines()).strip()


def _enum_prefix(name: str) -> str:
    """ROLE_ for Role, PROMPT_FORMAT_ for PromptFormat: what every value name begins with."""
    return _snake(name).upper() + "_"


def _snake(name: str) -> str:
    """append_entries for AppendEntries."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _camel(name: str) -> str:
    """ContextManagement for context_management."""
    return "".join(part.capitalize() for part in name.split("_"))


def _docstring(text: str, indent: str) -> list[str]:
    if not text:
        return []
    body = text.replace("\\", "\\\\").replace('"""', "'''")
    lines = body.splitlines()
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [
        f'{indent}"""{lines[0]}',
        *(f"{indent}{line}".rstrip() for line in lines[1:]),
        f'{indent}"""',
    ]


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}#: {line}".rstrip() for line in text.splitlines()]


def write_types(api: Api) -> dict[str, str]:
    """``types.py`` and the modules of ``_types/`` it gathers, by path under the package."""
    sections = api.sections
    modules = {"_types/__init__.py": _types_package(), "_types/enums.py": _enums_module(api)}
    for section in sections:
        modules[f"_types/{section.module}.py"] = _section_module(api, section)
    exported = {"enums": [e.name for e in api.file.enum_type]}
    for section in sections:
        exported[section.module] = [api.file.message_type[i].name for i in section.messages]
    out = [
        HEADER.format(PROTO),
        '"""The API\'s messages and enums as plain Python values.',
        "",
        "Every message of the .proto is a dataclass here, every enum an IntEnum; the",
        "documentation is the .proto's. Build requests from them and read answers as",
        "them: the client converts to and from protocol buffers. They are written in",
        "sessionstore_client._types, a module per section of the .proto (the enums in",
        "one of their own), and are all imported here.",
        '"""',
        "",
    ]
    for module in sorted(exported):
        out += _imports(f"sessionstore_client._types.{module}", exported[module])
    names = [name for found in exported.values() for name in found]
    out += ["", _all(names)]
    modules["types.py"] = "\n".join(out).rstrip() + "\n"
    return modules


def _imports(module: str, names: Iterable[str]) -> list[str]:
    """One import statement, its names in isort's order (ruff format wraps it)."""
    return [f"from {module} import {', '.join(sorted(names, key=lambda n: (n.lower(), n)))}"]


def _all(names: Iterable[str]) -> str:
    """The module's ``__all__``, sorted (ruff format wraps it)."""
    quoted = ", ".join(f'"{name}"' for name in sorted(names))
    return f"__all__ = [{quoted}]"


def _types_package() -> str:
    return "\n".join(
        [
            HEADER.format(PROTO),
            '"""The API\'s messages, a module per section of the .proto, and its enums.',
            "",
            "Import them from sessionstore_client.types, which has them all.",
            '"""',
            "",
        ]
    )


def _enums_module(api: Api) -> str:
    out = [
        HEADER.format(PROTO),
        '"""The API\'s enums, whichever section of the .proto declares them.',
        "",
        "The sections' dataclasses have their values as defaults, so they import them",
        "when they load: kept apart, the enums import nothing.",
        '"""',
        "",
        "import enum",
        "",
        _all(e.name for e in api.file.enum_type),
    ]
    for index, enum in enumerate(api.file.enum_type):
        out += ["", "", f"class {enum.name}(enum.IntEnum):"]
        out += _docstring(api.comments.get((5, index), f"The API's {enum.name} values."), "    ")
        for number, value in enumerate(enum.value):
            out += _comment(api.comments.get((5, index, 2, number), ""), "    ")
            out.append(f"    {api.enum_member(enum.name, value.name)} = {value.number}")
    return "\n".join(out).rstrip() + "\n"


def _section_module(api: Api, section: Section) -> str:
    names = [api.file.message_type[i].name for i in section.messages]
    classes: list[str] = []
    aliases: list[str] = []
    used: set[str] = set()
    for index in section.messages:
        message = api.file.message_type[index]
        members = api.alias(message)
        if members is not None:
            elsewhere = set(members) - set(names)
            if elsewhere:  # an alias is a value: its members must be defined before it
                raise SystemExit(f"{message.name}'s members {sorted(elsewhere)} are elsewhere")
            aliases += [
                "",
                *_comment(api.comments.get((4, index), ""), ""),
                f"{message.name}: TypeAlias = {' | '.join(members)}",
                f'"""One of the content block types; the {message.name} message."""',
            ]
            used.add("TypeAlias")
            continue
        classes += ["", "", "@dataclass(slots=True)", f"class {message.name}:"]
        classes += _docstring(api.comments.get((4, index), f"The {message.name} message."), "    ")
        classes += ["", f'    PROTO: ClassVar[str] = "{PACKAGE}.{message.name}"']
        used.add("ClassVar")
        for attribute in api.attributes(index):
            classes += _comment(attribute.comment, "    ")
            classes.append(f"    {attribute.name}: {attribute.annotation} = {attribute.default}")
            used |= _words(f"{attribute.annotation} {attribute.default}")
    out = [
        HEADER.format(PROTO),
        f'"""The messages {section.described}, as dataclasses.',
        "",
        "sessionstore_client.types has every message and enum of the API.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
    if classes:
        used.add("dataclass")
    dataclasses = sorted({"dataclass", "field"} & used)
    if dataclasses:
        out.append(f"from dataclasses import {', '.join(dataclasses)}")
    if "datetime" in used:
        out.append("from datetime import datetime")
    typing = sorted({"ClassVar", "TypeAlias"} & used)
    if typing:
        out.append(f"from typing import {', '.join(typing)}")
    enums = used & set(api.enums)
    if enums:
        out += ["", *_imports("sessionstore_client._types.enums", enums)]
    out += ["", _all(names)]
    out += classes + aliases
    others: dict[str, set[str]] = {}
    for name in sorted((used & set(api.messages)) - set(names)):
        others.setdefault(api.section_of[name].module, set()).add(name)
    if others:
        out += [
            "",
            "# Other sections' messages, named in the annotations above. Imported last,",
            "# once this module's classes are defined, so that two sections naming each",
            "# other's messages load whichever of them is imported first.",
        ]
        for module in sorted(others):
            out += _imports(f"sessionstore_client._types.{module}", others[module])
    return "\n".join(out).rstrip() + "\n"


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text))


@dataclass(frozen=True)
class Rpc:
    name: str
    snake: str
    request: str
    response: str
    client_streaming: bool
    server_streaming: bool
    comment: str


def rpcs(api: Api) -> list[Rpc]:
    service = api.file.service[0]
    found = []
    for number, method in enumerate(service.method):
        found.append(
            Rpc(
                method.name,
                _snake(method.name),
                api.type_name(method.input_type),
                api.type_name(method.output_type),
                method.client_streaming,
                method.server_streaming,
                api.comments.get((6, 0, 2, number), ""),
            )
        )
    return found


def _parameters(api: Api, rpc: Rpc) -> tuple[list[str], list[str]]:
    """The method's parameters and the request's keyword arguments built from them."""
    index = [m.name for m in api.file.message_type].index(rpc.request)
    parameters, arguments = [], []
    for attribute in api.attributes(index):
        if attribute.name == "session_id" and rpc.name not in SESSION_ID_OPTIONAL:
            parameters.insert(0, "session_id: str")
        else:
            annotation, default, argument = attribute.annotation, attribute.default, attribute.name
            if annotation.startswith(("list[", "dict[")):  # None stands for empty
                container = "Sequence" if annotation.startswith("list[") else "Mapping"
                annotation, default = f"{container}[{annotation[5:]} | None", "None"
                argument = f"{attribute.annotation[:4]}({attribute.name} or ())"
            parameters.append(f"{attribute.name}: {annotation} = {default}")
            arguments.append(f"{attribute.name}={argument}")
            continue
        arguments.append("session_id=session_id")
    if rpc.name in SESSION_ID_OPTIONAL and "session_id=session_id" in arguments:
        position = next(i for i, p in enumerate(parameters) if p.startswith("session_id"))
        parameters.insert(0, parameters.pop(position))
    return parameters, arguments


def _signature(parameters: list[str]) -> str:
    positional = [p for p in parameters if p.startswith("session_id")]
    keyword = [p for p in parameters if not p.startswith("session_id")]
    parts = ["self", *positional, "*", *keyword, "timeout: float | None = None"]
    if not keyword and not positional:
        parts.remove("*")
    return ", ".join(parts)


def write_methods(api: Api) -> dict[str, str]:
    """The modules of ``_methods/``, by path under the package: one per section with RPCs."""
    areas: dict[Section, list[Rpc]] = {}
    for rpc in rpcs(api):
        if not rpc.client_streaming:  # written by hand in the client, over its own arguments
            areas.setdefault(api.section_of[rpc.request], []).append(rpc)
    modules = {"_methods/calls.py": _calls_module()}
    for section, found in areas.items():
        modules[f"_methods/{section.module}.py"] = _area_module(api, section, found)
    out = [
        HEADER.format(PROTO),
        '"""One method per RPC, for the synchronous client and for the asyncio one.',
        "",
        "Each module here has the RPCs whose requests a section of the .proto declares",
        "(the section's module of sessionstore_client._types); SyncMethods and",
        "AsyncMethods gather them for sessionstore_client.client and .aio.",
        '"""',
        "",
    ]
    for section in sorted(areas, key=lambda s: s.module):
        kinds = [f"{kind}{_camel(section.module)}Methods" for kind in ("Async", "Sync")]
        out += _imports(f"sessionstore_client._methods.{section.module}", kinds)
    out += ["", _all(["AsyncMethods", "SyncMethods"])]
    for kind, client in (("Sync", "synchronous"), ("Async", "asyncio")):
        # The sections in the order of their first RPCs in the service.
        bases = ", ".join(f"{kind}{_camel(s.module)}Methods" for s in areas)
        out += ["", "", f"class {kind}Methods({bases}):"]
        out.append(f'    """The RPCs as methods of the {client} client."""')
    modules["_methods/__init__.py"] = "\n".join(out).rstrip() + "\n"
    return modules


def _calls_module() -> str:
    out = [
        HEADER.format(PROTO),
        '"""The calls every RPC method makes: the clients implement them.',
        "",
        "The transport (deadline, retries, errors) is the client's: see",
        "sessionstore_client.client and .aio.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import AsyncIterator, Iterator",
        "from typing import Any, TypeVar",
        "",
        _all(["AsyncCalls", "SyncCalls"]),
        '_R = TypeVar("_R")',
    ]
    for kind, client in (("Sync", "synchronous"), ("Async", "asyncio")):
        sync = kind == "Sync"
        out += [
            "",
            "",
            f"class {kind}Calls:",
            f'    """What the RPC methods of the {client} client call."""',
            "",
            f"    {'def' if sync else 'async def'} _unary(",
            "        self, method: str, request: Any, response: type[_R], timeout: float | None",
            "    ) -> _R:",
            "        raise NotImplementedError",
            "",
            "    def _server_stream(",
            "        self, method: str, request: Any, response: type[_R], timeout: float | None",
            f"    ) -> {'Iterator' if sync else 'AsyncIterator'}[_R]:",
            "        raise NotImplementedError",
        ]
    return "\n".join(out).rstrip() + "\n"


def _area_module(api: Api, section: Section, found: list[Rpc]) -> str:
    used = _words(" ".join(_signature(_parameters(api, rpc)[0]) for rpc in found))
    names = {r.request for r in found} | {r.response for r in found}
    names |= used & (set(api.messages) | set(api.enums))
    collections = sorted({"Mapping", "Sequence"} & used)
    if any(rpc.server_streaming for rpc in found):
        collections = ["AsyncIterator", "Iterator", *collections]
    out = [
        HEADER.format(PROTO),
        f'"""The RPCs whose requests are {section.described}.',
        "",
        "One method each, for the synchronous client and for the asyncio one: it takes",
        "the request's fields as arguments and answers the response as the dataclass of",
        "sessionstore_client.types.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
    if collections:
        out.append(f"from collections.abc import {', '.join(collections)}")
    if "datetime" in used:
        out.append("from datetime import datetime")
    if collections or "datetime" in used:
        out.append("")
    out += [
        "from sessionstore_client._methods.calls import AsyncCalls, SyncCalls",
        *_imports("sessionstore_client.types", names),
        "",
        _all(f"{kind}{_camel(section.module)}Methods" for kind in ("Async", "Sync")),
    ]
    for kind in ("Sync", "Async"):
        out += _methods_class(api, kind, section, found)
    return "\n".join(out).rstrip() + "\n"


def _methods_class(api: Api, kind: str, section: Section, found: list[Rpc]) -> list[str]:
    sync = kind == "Sync"
    client = "synchronous" if sync else "asyncio"
    out = [
        "",
        "",
        f"class {kind}{_camel(section.module)}Methods({kind}Calls):",
        f'    """The "{section.name}" RPCs as methods of the {client} client."""',
    ]
    awaited = "" if sync else "await "
    call_def = "def" if sync else "async def"
    stream_type = "Iterator" if sync else "AsyncIterator"
    for rpc in found:
        parameters, arguments = _parameters(api, rpc)
        build = ", ".join(arguments)
        request = f"{rpc.request}({build})"
        out.append("")
        if rpc.server_streaming:
            out.append(
                f"    def {rpc.snake}({_signature(parameters)}) -> {stream_type}[{rpc.response}]:"
            )
            out += _docstring(rpc.comment, "        ")
            call = f'self._server_stream("{rpc.name}", {request}, {rpc.response}, timeout)'
            out.append(f"        return {call}")
        else:
            out.append(f"    {call_def} {rpc.snake}({_signature(parameters)}) -> {rpc.response}:")
            out += _docstring(rpc.comment, "        ")
            call = f'self._unary("{rpc.name}", {request}, {rpc.response}, timeout)'
            out.append(f"        return {awaited}{call}")
    return out


def _described(proto: Path, include: Path) -> descriptor_pb2.FileDescriptorProto:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.bin"
        _protoc(
            ["-I", str(include), "--include_source_info", f"--descriptor_set_out={out}", str(proto)]
        )
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return files.file[0]


def _protoc(arguments: list[str]) -> None:
    # The mypy plugin (protoc-gen-mypy) is a script beside this interpreter.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    command = [sys.executable, "-m", "grpc_tools.protoc", *arguments]
    subprocess.run(command, check=True, env={**os.environ, "PATH": path})


def _formatted(paths: list[Path]) -> None:
    command = [sys.executable, "-m", "ruff", "format", "--quiet", "--config", "pyproject.toml"]
    subprocess.run([*command, *(str(path) for path in paths)], check=True)


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else CLIENT_SRC
    package = out / "sessionstore_client"
    api = Api(_described(PROTO, Path(".")))
    modules = write_types(api) | write_methods(api)
    for directory in ("_types", "_methods"):  # wholly generated: no module of a gone section
        for stale in sorted((package / directory).glob("*.py")):
            stale.unlink()
        (package / directory).mkdir(parents=True, exist_ok=True)
    for name, text in sorted(modules.items()):
        (package / name).write_text(text)
    _formatted([package / name for name in sorted(modules)])
    generated = package / "_proto"
    generated.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        _protoc(["-I", ".", f"--python_out={tmp}", f"--mypy_out={tmp}", str(PROTO)])
        for suffix in (".py", ".pyi"):
            source = Path(tmp) / PROTO.with_name(PROTO.stem + "_pb2" + suffix)
            shutil.copyfile(source, generated / source.name)
    if not (out / STATUS_PROTO).exists():
        shutil.copyfile(CLIENT_SRC / STATUS_PROTO, out / STATUS_PROTO)
    _protoc(["-I", str(out), f"--python_out={out}", f"--mypy_out={out}", str(out / STATUS_PROTO)])


if __name__ == "__main__":
    main()
