"""One-dimensional arrays of a known element type, sent to PostgreSQL in binary.

psycopg dumps a plain list by inspecting it on every call (which element
type, which dumper, how deep), in Python: a save's seventeen array
parameters cost about 60 microseconds that way, a third of its client-side
work. A list wrapped here names its PostgreSQL type, so it is dumped by one
registered dumper in a single pass; the array goes in PostgreSQL's binary
format (a header, then each element's length and bytes).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from psycopg import postgres
from psycopg.adapt import AdaptersMap, Dumper
from psycopg.pq import Format

# ndim, has-nulls flag, element oid, length, lower bound.
_HEADER = struct.Struct("!iiIii")
_LENGTH = struct.Struct("!i")
_NULL = _LENGTH.pack(-1)


class TypedArray:
    """A list to send as a PostgreSQL array of ``element`` (its type's name)."""

    __slots__ = ("items",)
    element = ""

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = items


class TextArray(TypedArray):
    __slots__ = ()
    element = "text"


class BigintArray(TypedArray):
    __slots__ = ()
    element = "int8"


class ByteaArray(TypedArray):
    __slots__ = ()
    element = "bytea"


def _encoder(element: str, encoding: str) -> Callable[[Any], bytes]:
    """How one element is written in PostgreSQL's binary format."""
    if element == "text":
        return lambda text: text.encode(encoding)
    if element == "int8":
        return lambda number: number.to_bytes(8, "big", signed=True)
    return bytes


class _ArrayDumper(Dumper):
    format = Format.BINARY
    element = ""

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        info = postgres.types[self.element]
        self.oid = info.array_oid
        self._element_oid = info.oid
        # The client encoding, as psycopg's own text dumper uses it.
        encoding = self.connection.info.encoding if self.connection is not None else "utf-8"
        self._encode = _encoder(self.element, encoding)

    def dump(self, obj: TypedArray) -> bytes:
        items, encode = obj.items, self._encode
        parts = [b""]
        nulls = 0
        for item in items:
            if item is None:
                parts.append(_NULL)
                nulls = 1
            else:
                data = encode(item)
                parts.append(_LENGTH.pack(len(data)))
                parts.append(data)
        parts[0] = _HEADER.pack(1, nulls, self._element_oid, len(items), 1)
        return b"".join(parts)


class _TextArrayDumper(_ArrayDumper):
    element = "text"


class _BigintArrayDumper(_ArrayDumper):
    element = "int8"


class _ByteaArrayDumper(_ArrayDumper):
    element = "bytea"


def register(adapters: AdaptersMap) -> None:
    """Lets connections of ``adapters`` dump the typed arrays (with ``%b``)."""
    adapters.register_dumper(TextArray, _TextArrayDumper)
    adapters.register_dumper(BigintArray, _BigintArrayDumper)
    adapters.register_dumper(ByteaArray, _ByteaArrayDumper)
