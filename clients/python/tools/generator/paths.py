"""Where the generator reads and writes, relative to the repository's root."""

from __future__ import annotations

from pathlib import Path

PROTO = Path("proto/sessionstore/v1/session_store.proto")
# The client's sources: the default output, and where rpc_status.proto is kept.
CLIENT_SRC = Path("clients/python/src")
STATUS_PROTO = Path("sessionstore_client/_proto/rpc_status.proto")
