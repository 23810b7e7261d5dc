"""Export files written before retention erases a session: one pi file per session,
``<export_dir>/<tenant>/<session id>.jsonl``.

A file is written under a temporary name, flushed to disk and then renamed, so
an export that fails half-way leaves no file that looks whole, and the erasure
that follows only ever comes after a complete, durable file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

# Tenants and session ids are letters, digits and . _ : @ - (domain.session); these
# two alone would name a directory rather than a file in it.
_RELATIVE = {".", ".."}


def export_path(export_dir: Path, tenant: str, session_id: str) -> Path:
    return export_dir / _component(tenant) / f"{_component(session_id)}.jsonl"


def write_export(path: Path, chunks: Iterable[bytes]) -> int:
    """Writes the file whole or not at all; answers its size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    written = 0
    try:
        with partial.open("wb") as file:
            for chunk in chunks:
                file.write(chunk)
                written += len(chunk)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    _sync_directory(path.parent)
    return written


def _component(name: str) -> str:
    return name.replace(".", "%2E") if name in _RELATIVE else name


def _sync_directory(directory: Path) -> None:
    # The rename is durable once the directory's entry is on disk.
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
