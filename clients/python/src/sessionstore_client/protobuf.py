"""Converting between the dataclasses of ``types`` and protocol buffer messages.

The clients do it for every call; code that also handles the API's messages
itself (to print them in protobuf's JSON mapping, say) uses ``to_proto`` and
``from_proto``. Driven by the messages' descriptors, with the mapping the generator follows
(see clients/python/tools/generate.py): a conversion plan is worked out once
per message type, then each conversion is a walk over it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from google.protobuf.timestamp_pb2 import Timestamp

from sessionstore_client import types
from sessionstore_client._proto import session_store_pb2 as pb
from sessionstore_client.errors import InvalidArgument

T = TypeVar("T")
_TIMESTAMP = "google.protobuf.Timestamp"
_PACKAGE = pb.DESCRIPTOR.package


def _python_name(full_name: str) -> str:
    return full_name.removeprefix(f"{_PACKAGE}.")


@cache
def _dataclass(full_name: str) -> type[Any]:
    found: type[Any] = getattr(types, _python_name(full_name))
    return found


@cache
def _enum(full_name: str) -> type[enum.IntEnum]:
    found: type[enum.IntEnum] = getattr(types, _python_name(full_name))
    return found


def _union_members(descriptor: Descriptor) -> dict[str, dict[str, FieldDescriptor]]:
    """Oneof name -> {member type's full name: member field}, for oneofs shown as a union."""
    unions = {}
    for oneof in descriptor.oneofs:
        fields = oneof.fields
        if _synthetic(oneof):
            continue
        types_ = [f.message_type for f in fields]
        if all(t is not None and t.full_name != _TIMESTAMP for t in types_):
            members = {t.full_name: f for t, f in zip(types_, fields, strict=True) if t is not None}
            if len(members) == len(fields):
                unions[oneof.name] = members
    return unions


def _synthetic(oneof: Any) -> bool:
    # proto3 `optional` fields live in a oneof of their own, named _<field>.
    return len(oneof.fields) == 1 and oneof.name == f"_{oneof.fields[0].name}"


@dataclass(frozen=True)
class _Plan:
    """How one message type converts: its plain fields and its union oneofs."""

    fields: tuple[FieldDescriptor, ...]
    unions: dict[str, dict[str, FieldDescriptor]]
    # Set when the message is nothing but one union (ContentBlock): its members.
    alias: dict[str, FieldDescriptor] | None


@cache
def _plan(descriptor: Descriptor) -> _Plan:
    unions = _union_members(descriptor)
    in_unions = {f.name for members in unions.values() for f in members.values()}
    plain = tuple(f for f in descriptor.fields if f.name not in in_unions)
    alias = next(iter(unions.values())) if len(unions) == 1 and not plain else None
    return _Plan(plain, unions, alias)


# -- to protocol buffers ---------------------------------------------------------------


def to_proto(value: Any) -> Message:
    """The protocol buffer message of a dataclass of ``types``.

    A value protobuf cannot take raises naming its field's path (say,
    ``entries[0].content[0].text``): ``InvalidArgument`` for a string that is not
    UTF-8 text (a lone surrogate, which ``json.loads`` makes of "\\ud800"),
    ``TypeError`` for a value of the wrong type."""
    descriptor = pb.DESCRIPTOR.message_types_by_name[type(value).__name__]
    return _message(value, descriptor, "")


def _message(value: Any, descriptor: Descriptor, path: str) -> Message:
    message: Message = GetMessageClass(descriptor)()
    if descriptor.full_name == _TIMESTAMP:
        if not isinstance(value, datetime):
            raise TypeError(f"{path} takes a datetime, not {_described(value)}")
        timestamp = Timestamp()
        timestamp.FromDatetime(_aware(value))
        return timestamp
    plan = _plan(descriptor)
    if plan.alias is not None:
        member = _member(plan.alias, value, path or descriptor.name)
        getattr(message, member.name).CopyFrom(_message(value, _type(member), path))
        return message
    expected = _dataclass(descriptor.full_name)
    if not isinstance(value, expected):
        raise TypeError(
            f"{path or 'the request'} takes {expected.__name__}, not {_described(value)}"
        )
    for field in plan.fields:
        _set(message, field, getattr(value, field.name), _joined(path, field.name))
    for name, members in plan.unions.items():
        chosen = getattr(value, name)
        if chosen is not None:
            where = _joined(path, name)
            member = _member(members, chosen, where)
            getattr(message, member.name).CopyFrom(_message(chosen, _type(member), where))
    return message


def _joined(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _type(field: FieldDescriptor) -> Descriptor:
    assert field.message_type is not None  # a union's members are messages
    return field.message_type


def _member(members: dict[str, FieldDescriptor], value: Any, where: str) -> FieldDescriptor:
    proto = getattr(type(value), "PROTO", None)
    if proto not in members:
        names = ", ".join(_python_name(m) for m in members)
        raise TypeError(f"{where} takes one of {names}, not {_described(value)}")
    return members[proto]


def _set(message: Message, field: FieldDescriptor, value: Any, path: str) -> None:
    if value is None:
        return
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        target = getattr(message, field.name)
        for key, item in value.items():
            _checked(target.__setitem__, key, item, where=f"{path}[{key!r}]")
    elif field.is_repeated:
        target = getattr(message, field.name)
        for index, item in enumerate(value):
            where = f"{path}[{index}]"
            if field.message_type is not None:
                target.append(_message(item, field.message_type, where))
            else:
                _checked(target.append, _scalar_value(field, item, where), where=where)
    elif field.message_type is not None:
        getattr(message, field.name).CopyFrom(_message(value, field.message_type, path))
    else:
        _checked(setattr, message, field.name, _scalar_value(field, value, path), where=path)


def _scalar_value(field: FieldDescriptor, value: Any, path: str) -> Any:
    if field.enum_type is None:
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        kind = _enum(field.enum_type.full_name)
        names = ", ".join(f"{kind.__name__}.{member.name}" for member in kind)
        raise TypeError(f"{path} takes {kind.__name__} ({names}), not {_described(value)}")
    return int(value)


def _checked(setter: Callable[..., Any], *arguments: Any, where: str) -> None:
    """``setter(*arguments)``, its failure raised naming the field at ``where``."""
    try:
        setter(*arguments)
    except UnicodeEncodeError as error:
        raise InvalidArgument(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{where} is not UTF-8 text: it holds a lone surrogate "
            f"({error.object[error.start : error.end]!r}); send valid UTF-8 (decoding JSON "
            "that escapes half a surrogate pair makes one)",
            "invalid_request",
        ) from None
    except (TypeError, ValueError):
        raise TypeError(f"{where} cannot take {_described(arguments[-1])}") from None


def _described(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.60}"


def _aware(moment: datetime) -> datetime:
    # A naive datetime is taken as UTC, as protobuf's own conversion does.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# -- from protocol buffers -------------------------------------------------------------


def from_proto(message: Message, kind: type[T]) -> T:
    """The dataclass ``kind`` holding what ``message`` holds."""
    value: T = _value(message)
    return value


def _value(message: Message) -> Any:
    descriptor = message.DESCRIPTOR
    if descriptor.full_name == _TIMESTAMP:
        return _datetime(message)
    plan = _plan(descriptor)
    if plan.alias is not None:
        chosen = message.WhichOneof(descriptor.oneofs[0].name)
        return _value(getattr(message, chosen)) if chosen else None
    values = {field.name: _read(message, field) for field in plan.fields}
    for name in plan.unions:
        chosen = message.WhichOneof(name)
        values[name] = _value(getattr(message, chosen)) if chosen else None
    return _dataclass(descriptor.full_name)(**values)


def _read(message: Message, field: FieldDescriptor) -> Any:
    raw = getattr(message, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return dict(raw)
    if field.is_repeated:
        if field.message_type is not None:
            return [v for v in (_value(m) for m in raw) if v is not None]
        return [_scalar(field)(v) for v in raw]
    if field.has_presence and not message.HasField(field.name):
        return None
    if field.message_type is not None:
        return _value(raw)
    return _scalar(field)(raw)


def _scalar(field: FieldDescriptor) -> Callable[[Any], Any]:
    if field.enum_type is not None:
        kind = _enum(field.enum_type.full_name)

        def as_enum(number: int) -> Any:
            try:
                return kind(number)
            except ValueError:
                return number  # a value newer than this client: kept as a number

        return as_enum
    return _same


def _same(value: Any) -> Any:
    return value


def _datetime(timestamp: Any) -> datetime:
    moment: datetime = timestamp.ToDatetime(tzinfo=UTC)
    return moment
