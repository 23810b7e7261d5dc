"""Writes ``_methods/``: a method per RPC, for the synchronous client and the asyncio one.

A module per section of the .proto that declares requests; its methods take the
request's fields as arguments. ``_methods/__init__.py`` gathers them.
"""

from __future__ import annotations

from .api import Api, Rpc, Section, rpcs
from .source import HEADER, camel, docstring, dunder_all, imports, module_text, words

# RPCs whose session_id may be left empty (generated, or "all sessions").
SESSION_ID_OPTIONAL = {"CreateSession", "ListCompactions", "ListPrunes"}


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
        HEADER,
        '"""One method per RPC, for the synchronous client and for the asyncio one.',
        "",
        "Each module here has the RPCs whose requests a section of the .proto declares",
        "(the section's module of sessionstore_client._types); SyncMethods and",
        "AsyncMethods gather them for sessionstore_client.client and .aio.",
        '"""',
        "",
    ]
    for section in sorted(areas, key=lambda s: s.module):
        kinds = [f"{kind}{camel(section.module)}Methods" for kind in ("Async", "Sync")]
        out += imports(f"sessionstore_client._methods.{section.module}", kinds)
    out += ["", dunder_all(["AsyncMethods", "SyncMethods"])]
    for kind, client in (("Sync", "synchronous"), ("Async", "asyncio")):
        # The sections in the order of their first RPCs in the service.
        bases = ", ".join(f"{kind}{camel(s.module)}Methods" for s in areas)
        out += ["", "", f"class {kind}Methods({bases}):"]
        out.append(f'    """The RPCs as methods of the {client} client."""')
    modules["_methods/__init__.py"] = module_text(out)
    return modules


def _calls_module() -> str:
    out = [
        HEADER,
        '"""The calls every RPC method makes: the clients implement them.',
        "",
        "The transport (deadline, retries, errors) is the client's: see",
        "sessionstore_client.client and .aio.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from abc import ABC, abstractmethod",
        "from collections.abc import AsyncIterator, Iterator",
        "from typing import Any, TypeVar",
        "",
        dunder_all(["AsyncCalls", "SyncCalls"]),
        '_R = TypeVar("_R")',
    ]
    for kind, client in (("Sync", "synchronous"), ("Async", "asyncio")):
        sync = kind == "Sync"
        out += [
            "",
            "",
            f"class {kind}Calls(ABC):",
            f'    """What the RPC methods of the {client} client call."""',
            "",
            "    @abstractmethod",
            f"    {'def' if sync else 'async def'} _unary(",
            "        self, method: str, request: Any, response: type[_R], timeout: float | None",
            "    ) -> _R:",
            "        ...",
            "",
            "    @abstractmethod",
            "    def _server_stream(",
            "        self, method: str, request: Any, response: type[_R], timeout: float | None",
            f"    ) -> {'Iterator' if sync else 'AsyncIterator'}[_R]:",
            "        ...",
        ]
    return module_text(out)


def _area_module(api: Api, section: Section, found: list[Rpc]) -> str:
    used = words(" ".join(_signature(_parameters(api, rpc)[0]) for rpc in found))
    names = {r.request for r in found} | {r.response for r in found}
    names |= used & (set(api.messages) | set(api.enums))
    collections = sorted({"Mapping", "Sequence"} & used)
    if any(rpc.server_streaming for rpc in found):
        collections = ["AsyncIterator", "Iterator", *collections]
    out = [
        HEADER,
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
        *imports("sessionstore_client.types", names),
        "",
        dunder_all(f"{kind}{camel(section.module)}Methods" for kind in ("Async", "Sync")),
    ]
    for kind in ("Sync", "Async"):
        out += _methods_class(api, kind, section, found)
    return module_text(out)


def _methods_class(api: Api, kind: str, section: Section, found: list[Rpc]) -> list[str]:
    sync = kind == "Sync"
    client = "synchronous" if sync else "asyncio"
    out = [
        "",
        "",
        f"class {kind}{camel(section.module)}Methods({kind}Calls):",
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
            out += docstring(rpc.comment, "        ")
            call = f'self._server_stream("{rpc.name}", {request}, {rpc.response}, timeout)'
            out.append(f"        return {call}")
        else:
            out.append(f"    {call_def} {rpc.snake}({_signature(parameters)}) -> {rpc.response}:")
            out += docstring(rpc.comment, "        ")
            call = f'self._unary("{rpc.name}", {request}, {rpc.response}, timeout)'
            out.append(f"        return {awaited}{call}")
    return out


def _parameters(api: Api, rpc: Rpc) -> tuple[list[str], list[str]]:
    """The method's parameters and the request's keyword arguments built from them."""
    index = [m.name for m in api.file.message_type].index(rpc.request)
    parameters: list[str] = []
    arguments: list[str] = []
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
