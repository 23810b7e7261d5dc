"""The API as the client's generated code sees it, from the .proto's descriptor.

How messages map to Python: scalars to int, float, str, bool and bytes; an enum
field to its IntEnum; google.protobuf.Timestamp to an aware datetime; a message
field (and a proto3 ``optional`` scalar) to ``X | None``; repeated fields to
lists and maps to dicts. A oneof whose members are messages of distinct types
is one field typed as their union, named for the oneof; a message that is only
such a oneof (ContentBlock) is the union itself. Other oneofs are a field per
member, at most one of them set.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

from .source import snake

PACKAGE = "sessionstore.v1"
TIMESTAMP = ".google.protobuf.Timestamp"

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
                module = snake(self.file.message_type[messages[0]].name).removesuffix("_request")
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


@dataclass(frozen=True)
class Rpc:
    """One RPC of the service, with its comment."""

    name: str
    snake: str
    request: str
    response: str
    client_streaming: bool
    server_streaming: bool
    comment: str


def rpcs(api: Api) -> list[Rpc]:
    """The service's RPCs, in its order."""
    service = api.file.service[0]
    found = []
    for number, method in enumerate(service.method):
        found.append(
            Rpc(
                method.name,
                snake(method.name),
                api.type_name(method.input_type),
                api.type_name(method.output_type),
                method.client_streaming,
                method.server_streaming,
                api.comments.get((6, 0, 2, number), ""),
            )
        )
    return found


def _uncommented(text: str) -> str:
    """A comment's text without the space each line has after the slashes."""
    return "\n".join(line.removeprefix(" ") for line in text.strip("\n").splitlines()).strip()


def _enum_prefix(name: str) -> str:
    """ROLE_ for Role, PROMPT_FORMAT_ for PromptFormat: what every value name begins with."""
    return snake(name).upper() + "_"
