"""Reading back what another release stored.

Value objects are stored as dicts of their fields. A record an older release
wrote lacks the fields added since: they read back with their defaults. One a
later release wrote may hold fields this one does not know: they are left
aside, so a server in a rolling upgrade reads what the newer ones write
rather than failing every read of that session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any


def known_fields(kind: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The items of ``data`` that name a field of the dataclass ``kind``."""
    names = {f.name for f in fields(kind)}
    return {name: value for name, value in data.items() if name in names}
