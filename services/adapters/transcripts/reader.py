"""Reading a transcript file of any format the store takes, named or detected."""

from __future__ import annotations

from collections.abc import Callable

from domain.errors import InvalidRequest
from services.adapters.transcripts import claude_code, openai, pi
from services.adapters.transcripts.ir import FORMATS, Transcript, TranscriptError, sniff

Reader = Callable[[bytes], Transcript]


def read_transcript(data: bytes, file_format: str, file_name: str = "") -> Transcript:
    """Reads a transcript of the given format ("auto" or empty: detected)."""
    try:
        return _read(data, file_format, file_name)
    except RecursionError:
        # Python's JSON reader gives up on nesting some thousand levels deep.
        raise TranscriptError(0, "the file nests JSON too deeply to read") from None


def _read(data: bytes, file_format: str, file_name: str) -> Transcript:
    chosen = file_format or "auto"
    if chosen == "auto":
        chosen = sniff(data, file_name)
    readers: dict[str, Reader] = {
        "pi": pi.read,
        "openclaw": pi.read_openclaw,
        "claude-code": claude_code.read,
        "openai": openai.read,
    }
    if chosen not in readers:
        raise InvalidRequest(
            f"format {file_format!r} is not one this server reads; use auto, " + ", ".join(FORMATS)
        )
    return readers[chosen](data)
