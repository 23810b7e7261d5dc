"""Readers and a writer for agent transcript files.

One module per format (``pi`` for pi v1/v3 and OpenClaw, ``claude_code``,
``openai``), each reading a file into the common intermediate representation
of ``ir``; ``reader`` picks one by the file's format, and ``pi_export`` writes
a session back as a pi v3 file. Contents of transcripts are data only: parsed
and stored, never interpreted.
"""

from __future__ import annotations

from services.adapters.transcripts.ir import FORMATS, Transcript, TranscriptError
from services.adapters.transcripts.reader import read_transcript

__all__ = ["FORMATS", "Transcript", "TranscriptError", "read_transcript"]
