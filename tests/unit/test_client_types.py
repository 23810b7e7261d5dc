"""The client's generated dataclasses, a module per section of the .proto.

The sections name each other's messages in their annotations, and import them
last: any of them loads first, and every annotation resolves at run time (as
pydantic or typing.get_type_hints need) as when they were one module.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from sessionstore_client import _types, types

SECTIONS = sorted(p.stem for p in Path(_types.__file__).parent.glob("*.py") if p.stem != "__init__")


def test_every_annotation_of_the_types_resolves() -> None:
    classes = [getattr(types, name) for name in types.__all__]
    classes = [c for c in classes if dataclasses.is_dataclass(c)]
    assert classes
    for dataclass in classes:
        typing.get_type_hints(dataclass)


@pytest.mark.parametrize("module", SECTIONS)
def test_each_section_loads_first(module: str) -> None:
    code = f"import sessionstore_client._types.{module}"
    subprocess.run([sys.executable, "-c", code], check=True)
