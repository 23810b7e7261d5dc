"""How the store writes the domain's value objects as JSON (the library's transcodings).

Content is sealed under the key of the event that holds it (services.adapters.sealing):
an entry's blocks and metadata, a compaction's summary, a system prompt, a title.
Erasure deletes the key; what the content then reads as is said here.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

from eventsourcing.persistence import JSONTranscoder, Transcoding

from domain.compaction import Compaction, CompactionFailure
from domain.content import Entry, Usage
from domain.context.calibration import ByteLesson, TokenLesson, WindowLesson
from domain.context.tool_result_guard import ToolResultDecision
from domain.erasure import ERASED_METADATA, ERASED_SUMMARY
from domain.pruning import PruneDecision
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt
from services.adapters import sealed_formats
from services.adapters.sealing import current_scope

# False while events are read for their structure only: entries' content stays sealed.
content_being_read: ContextVar[bool] = ContextVar("entry_content", default=True)


class _AsDict(Transcoding):
    """A value object written as the dict its own to_dict/from_dict define."""

    type: Any  # a class with to_dict() and from_dict()
    name: str

    def encode(self, obj: Any) -> Any:
        return obj.to_dict()

    def decode(self, data: Any) -> Any:
        return self.type.from_dict(data)


class EntryAsRecord(Transcoding):
    """An entry as its positional record, its content sealed under the entry's key.

    Stored as ``{"r": record, "s": sealed}``: the record keeps the structure
    (ids, role, counts, tool call ids and names) with the content blocks cut to
    their skeletons and no metadata; ``s`` seals the blocks and metadata. A
    plain list is an entry stored before sealing, read as it is.
    """

    type = Entry
    name = "entry"

    def encode(self, obj: Entry) -> Any:
        return sealed_formats.seal_entry(current_scope(), obj.to_record())

    def decode(self, data: Any) -> Entry:
        if isinstance(data, list):
            return Entry.from_record(data)
        if not content_being_read.get():
            return Entry.from_record(sealed_formats.unopened_entry(data))
        return Entry.from_record(sealed_formats.open_entry(current_scope(), data))


class _SealedAsDict(_AsDict):
    """A value object written as its dict, the fields that carry content sealed under
    the key of the event (or snapshot) that holds it; once that key is deleted they
    read as ``erased`` says. A plain dict is one stored before it was sealed."""

    # The fields that carry content, and what each reads as once erased.
    erased: Mapping[str, Any]

    def seals(self, obj: Any) -> bool:
        return True

    def encode(self, obj: Any) -> Any:
        data = obj.to_dict()
        if not self.seals(obj):
            return data
        return sealed_formats.seal_fields(current_scope(), data, tuple(self.erased))

    def decode(self, data: Any) -> Any:
        opened, _ = sealed_formats.open_fields(current_scope, data, self.erased)
        return self.type.from_dict(opened)


class SettingsAsDict(_SealedAsDict):
    """A session's settings, the title sealed (the labels and the rest are the client's
    structure). Settings without a title are a plain dict."""

    type = SessionSettings
    name = "settings"
    erased = MappingProxyType({"title": ""})

    def seals(self, obj: SessionSettings) -> bool:
        return bool(obj.title)


class CompactionAsDict(_SealedAsDict):
    """A compaction's receipt, its summary, instructions, details, provider items and
    the blocks of the user message it carries sealed."""

    type = Compaction
    name = "compaction"
    erased = MappingProxyType(
        {
            "summary": ERASED_SUMMARY,
            "instructions": "",
            "details": ERASED_METADATA,
            "provider_item": None,
            "provider_retained": (),
            "carried_blocks": (),
        }
    )


class PruneDecisionAsDict(_AsDict):
    type = PruneDecision
    name = "prune"


class GuardDecisionAsDict(_AsDict):
    type = ToolResultDecision
    name = "guard"


class SystemPromptAsDict(_SealedAsDict):
    """A system prompt, its text, files, skills and tools sealed."""

    type = SystemPrompt
    name = "system_prompt"
    erased = MappingProxyType({"text": "", "files": [], "skills": [], "tools": []})


class CompactionFailureAsDict(_AsDict):
    type = CompactionFailure
    name = "compaction_failure"


class TokenLessonAsDict(_AsDict):
    type = TokenLesson
    name = "token_lesson"


class WindowLessonAsDict(_AsDict):
    type = WindowLesson
    name = "window_lesson"


class ByteLessonAsDict(_AsDict):
    type = ByteLesson
    name = "byte_lesson"


class UsageAsList(Transcoding):
    type = Usage
    name = "usage"

    def encode(self, obj: Usage) -> list[int]:
        return [obj.input_tokens, obj.output_tokens, obj.cache_read_tokens, obj.cache_write_tokens]

    def decode(self, data: list[int]) -> Usage:
        return Usage(*data)


class MappingAsDict(Transcoding):
    """Read-only mappings inside value objects (labels, details)."""

    type = MappingProxyType
    name = "map"

    def encode(self, obj: MappingProxyType[str, Any]) -> dict[str, Any]:
        return dict(obj)

    def decode(self, data: dict[str, Any]) -> MappingProxyType[str, Any]:
        return MappingProxyType(data)


def register_all(transcoder: JSONTranscoder) -> None:
    for transcoding in (
        EntryAsRecord(),
        SettingsAsDict(),
        CompactionAsDict(),
        PruneDecisionAsDict(),
        GuardDecisionAsDict(),
        SystemPromptAsDict(),
        CompactionFailureAsDict(),
        TokenLessonAsDict(),
        WindowLessonAsDict(),
        ByteLessonAsDict(),
        UsageAsList(),
        MappingAsDict(),
    ):
        transcoder.register(transcoding)
