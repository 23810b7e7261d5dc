"""Writes ``types.py`` and ``_types/``: a dataclass per message, an IntEnum per enum.

A module of ``_types`` per section of the .proto, and ``enums.py``;
``types.py`` imports them all.
"""

from __future__ import annotations

from .api import PACKAGE, Api, Section
from .source import HEADER, comment, docstring, dunder_all, imports, module_text, words


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
        HEADER,
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
        out += imports(f"sessionstore_client._types.{module}", exported[module])
    names = [name for found in exported.values() for name in found]
    out += ["", dunder_all(names)]
    modules["types.py"] = module_text(out)
    return modules


def _types_package() -> str:
    return "\n".join(
        [
            HEADER,
            '"""The API\'s messages, a module per section of the .proto, and its enums.',
            "",
            "Import them from sessionstore_client.types, which has them all.",
            '"""',
            "",
        ]
    )


def _enums_module(api: Api) -> str:
    out = [
        HEADER,
        '"""The API\'s enums, whichever section of the .proto declares them.',
        "",
        "The sections' dataclasses have their values as defaults, so they import them",
        "when they load: kept apart, the enums import nothing.",
        '"""',
        "",
        "import enum",
        "",
        dunder_all(e.name for e in api.file.enum_type),
    ]
    for index, enum in enumerate(api.file.enum_type):
        out += ["", "", f"class {enum.name}(enum.IntEnum):"]
        out += docstring(api.comments.get((5, index), f"The API's {enum.name} values."), "    ")
        for number, value in enumerate(enum.value):
            out += comment(api.comments.get((5, index, 2, number), ""), "    ")
            out.append(f"    {api.enum_member(enum.name, value.name)} = {value.number}")
    return module_text(out)


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
                *comment(api.comments.get((4, index), ""), ""),
                f"{message.name}: TypeAlias = {' | '.join(members)}",
                f'"""One of the content block types; the {message.name} message."""',
            ]
            used.add("TypeAlias")
            continue
        classes += ["", "", "@dataclass(slots=True)", f"class {message.name}:"]
        classes += docstring(api.comments.get((4, index), f"The {message.name} message."), "    ")
        classes += ["", f'    PROTO: ClassVar[str] = "{PACKAGE}.{message.name}"']
        used.add("ClassVar")
        for attribute in api.attributes(index):
            classes += comment(attribute.comment, "    ")
            classes.append(f"    {attribute.name}: {attribute.annotation} = {attribute.default}")
            used |= words(f"{attribute.annotation} {attribute.default}")
    out = [
        HEADER,
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
        out += ["", *imports("sessionstore_client._types.enums", enums)]
    out += ["", dunder_all(names)]
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
            out += imports(f"sessionstore_client._types.{module}", others[module])
    return module_text(out)
