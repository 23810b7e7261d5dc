# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The API's enums, whichever section of the .proto declares them.

The sections' dataclasses have their values as defaults, so they import them
when they load: kept apart, the enums import nothing.
"""

import enum

__all__ = ["FileStatus", "PromptFormat", "PruneAction", "Role"]


class Role(enum.IntEnum):
    """The API's Role values."""

    UNSPECIFIED = 0
    USER = 1
    ASSISTANT = 2
    TOOL = 3
    SYSTEM = 4
    CUSTOM = 5


class PruneAction(enum.IntEnum):
    """The API's PruneAction values."""

    UNSPECIFIED = 0
    #: Keep head and tail characters, with a notice in between.
    SOFT_TRIM = 1
    #: Replace the whole result with a placeholder.
    HARD_CLEAR = 2


class PromptFormat(enum.IntEnum):
    """The API's PromptFormat values."""

    UNSPECIFIED = 0
    #: OpenAI chat completions messages; litellm takes them as they are.
    OPENAI = 1
    #: Anthropic Messages API: top-level system plus alternating messages.
    ANTHROPIC = 2
    #: OpenAI Responses API input items; the system prompt is the instructions.
    OPENAI_RESPONSES = 3
    #: Google Gemini generateContent contents; the system prompt is the
    #: systemInstruction.
    GEMINI = 4


class FileStatus(enum.IntEnum):
    """The API's FileStatus values."""

    UNSPECIFIED = 0
    OK = 1
    TRUNCATED = 2
    MISSING = 3
