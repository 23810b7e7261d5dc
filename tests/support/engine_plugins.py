"""A context engine installed as a package installs one: its module, and a dist-info
whose entry points register it, on the path. A server (or application) built
while it is installed finds it as it finds any third-party engine."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from services.engine.registry import ENTRY_POINT_GROUP


@contextmanager
def installed_engine(directory: Path, name: str, module: str, source: str) -> Iterator[None]:
    """Engine ``name``: ``source``'s class ``Engine``, in module ``module`` under ``directory``."""
    (directory / f"{module}.py").write_text(source)
    dist = directory / f"{module}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {module}:Engine\n")
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.path.remove(str(directory))
        sys.modules.pop(module, None)
