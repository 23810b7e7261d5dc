"""Every string of every request, checked once at the door against domain.storable.

The fields are found from the request's own descriptor, so a field added to
the proto is checked the day it is added, with the limit its name gives it
(domain.storable.limit_of). Strings a request carries in bytes
that are not UTF-8 (a lone surrogate among them) do not decode at all; for
those ``undecodable_field`` reads the wire format to name the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from domain.errors import quoted
from domain.storable import check_storable, limit_of

# How a field's values are checked (see RequestStrings._fits).
_OTHER, _TEXT, _TEXTS, _MESSAGE, _MESSAGES, _MAP = range(6)
# A field's kind, its limit, and for a map its keys' and values' limits and value kind.
_Plan = tuple[int, int, int, int, int]


class RequestStrings:
    """Checks requests' strings; ``content_chars`` bounds content (one message's worth).

    Every request is checked, so the common case, a request with nothing to refuse,
    takes a quick walk (``_fits``) that names nothing and keeps what it learns of each
    field; only a request it refuses is walked again, to name the field."""

    def __init__(self, content_chars: int) -> None:
        self.content_chars = content_chars
        self._plans: dict[FieldDescriptor, _Plan] = {}

    def limit(self, name: str) -> int:
        return limit_of(name, self.content_chars)

    def check(self, message: Message, path: str = "") -> None:
        """Raises InvalidRequest naming the first string field no store can hold."""
        if not self._fits(message):
            self._refuse(message, path)

    def _fits(self, message: Message) -> bool:
        """Whether every string of ``message`` can be stored (check_storable's rule for
        decoded UTF-8: within its limit, no NUL)."""
        plans = self._plans
        for field, value in message.ListFields():
            plan = plans.get(field)
            if plan is None:
                plan = plans[field] = self._plan(field, value)
            kind, limit = plan[0], plan[1]
            if kind == _TEXT:
                if len(value) > limit or "\x00" in value:
                    return False
            elif kind == _TEXTS:
                if any(len(text) > limit or "\x00" in text for text in value):
                    return False
            elif kind == _MESSAGE:
                if not self._fits(value):
                    return False
            elif kind == _MESSAGES:
                if not all(self._fits(item) for item in value):
                    return False
            elif kind == _MAP and not self._map_fits(plan, value):
                return False
        return True

    def _map_fits(self, plan: _Plan, items: Mapping[Any, Any]) -> bool:
        _, _, key_limit, value_limit, value_kind = plan
        for key, value in items.items():
            if isinstance(key, str) and (len(key) > key_limit or "\x00" in key):
                return False
            if value_kind == _TEXT:
                if len(value) > value_limit or "\x00" in value:
                    return False
            elif value_kind == _MESSAGE and not self._fits(value):
                return False
        return True

    def _plan(self, field: FieldDescriptor, value: Any) -> _Plan:
        """How ``field`` is checked; ``value``, one of its values, tells a map (as in
        _refuse: its options would import descriptor_pb2)."""
        entry = field.message_type
        if isinstance(value, Mapping) and entry is not None:
            value_type = entry.fields_by_name["value"].type
            value_kind = (
                _TEXT
                if value_type == FieldDescriptor.TYPE_STRING
                else _MESSAGE
                if value_type == FieldDescriptor.TYPE_MESSAGE
                else _OTHER
            )
            return (
                _MAP,
                0,
                self.limit(f"{field.name}.key"),
                self.limit(f"{field.name}.value"),
                value_kind,
            )
        if field.type == FieldDescriptor.TYPE_STRING:
            return (_TEXTS if field.is_repeated else _TEXT, self.limit(field.name), 0, 0, 0)
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            return (_MESSAGES if field.is_repeated else _MESSAGE, 0, 0, 0, 0)
        return (_OTHER, 0, 0, 0, 0)

    def _refuse(self, message: Message, path: str) -> None:
        """Raises InvalidRequest naming the first string field no store can hold."""
        for field, value in message.ListFields():
            name = f"{path}{field.name}"
            # A map field is known by its value: asking its entry type's options
            # (GetOptions().map_entry) would import protobuf's descriptor_pb2, some
            # 3 MB that serving needs nowhere else, in the first request.
            if isinstance(value, Mapping) and field.message_type is not None:
                self._check_map(field.name, field.message_type, value, name)
            elif field.type == FieldDescriptor.TYPE_STRING:
                values = value if field.is_repeated else [value]
                for index, text in enumerate(values):
                    shown = f"{name}[{index}]" if field.is_repeated else name
                    check_storable(text, shown, self.limit(field.name), utf8=True)
            elif field.type == FieldDescriptor.TYPE_MESSAGE:
                if field.is_repeated:
                    for index, item in enumerate(value):
                        self._refuse(item, f"{name}[{index}].")
                else:
                    self._refuse(value, f"{name}.")

    def _check_map(
        self, field: str, entry: Descriptor, items: Mapping[Any, Any], name: str
    ) -> None:
        value_field = entry.fields_by_name["value"]
        for key, value in items.items():
            if isinstance(key, str):
                check_storable(key, f"{name} key", self.limit(f"{field}.key"), utf8=True)
            shown = f"{name}[{quoted(key)}]"
            if value_field.type == FieldDescriptor.TYPE_STRING:
                check_storable(value, shown, self.limit(f"{field}.value"), utf8=True)
            elif value_field.type == FieldDescriptor.TYPE_MESSAGE:
                self._refuse(value, f"{shown}.")


def undecodable_field(data: bytes, descriptor: Descriptor, path: str = "") -> str | None:
    """The first string field in ``data`` (a ``descriptor`` message on the wire) whose
    bytes are not UTF-8, as a path; None if there is none or the bytes make no sense."""
    seen: dict[int, int] = {}
    position = 0
    try:
        while position < len(data):
            key, position = _varint(data, position)
            number, wire_type = key >> 3, key & 7
            if wire_type == 0:
                _, position = _varint(data, position)
            elif wire_type in (1, 5):
                position += 8 if wire_type == 1 else 4
            elif wire_type != 2:
                return None  # groups: not in this API
            else:
                length, position = _varint(data, position)
                chunk, position = data[position : position + length], position + length
                field = descriptor.fields_by_number.get(number)
                if field is None:
                    continue
                index = seen[number] = seen.get(number, -1) + 1
                is_map = (
                    field.message_type is not None and field.message_type.GetOptions().map_entry
                )
                name = f"{path}{field.name}"
                if field.is_repeated and not is_map:
                    name = f"{name}[{index}]"
                found = _undecodable_value(chunk, field, name)
                if found is not None:
                    return found
    except IndexError:
        return None
    return None


def _undecodable_value(chunk: bytes, field: FieldDescriptor, name: str) -> str | None:
    if field.type == FieldDescriptor.TYPE_STRING:
        try:
            chunk.decode("utf-8")  # strict: a lone surrogate's bytes fail too
        except UnicodeDecodeError:
            return name
    elif field.message_type is not None:
        return undecodable_field(chunk, field.message_type, f"{name}.")
    return None


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
