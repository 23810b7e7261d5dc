"""litellm, imported on first use and configured for a server.

Importing litellm costs seconds of CPU, so nothing imports it at start-up:
the summarisers and the error classifier call :func:`load_litellm` when they
first need it. Where a model summariser is in sight (a providers file, a
session whose chain names a model), :func:`load_in_background` starts the
import early, so that the first compaction does not spend those seconds while
a prompt view waits for it (a view waits one second, then drops what it must).

Before the import the local model map is forced (``LITELLM_LOCAL_MODEL_COST_MAP``),
else litellm fetches a price map from the internet; after it, litellm's "Give
Feedback" banner that it prints to stdout on every mapped error is turned off.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType

_lock = threading.Lock()
_module: ModuleType | None = None
_loading = threading.Event()


def load_litellm() -> ModuleType:
    global _module
    with _lock:
        if _module is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            litellm.suppress_debug_info = True
            _module = litellm
        return _module


def load_in_background() -> None:
    """Starts importing litellm on a thread of its own, once; returns at once."""
    if _loading.is_set():
        return
    _loading.set()
    threading.Thread(target=load_litellm, name="litellm-import", daemon=True).start()
