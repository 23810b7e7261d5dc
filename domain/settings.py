"""A session's settings and context-management policies, with their defaults.

The defaults are the ones OpenClaw's engine ships with (see SPEC.md). Settings
are immutable; a change is a new value recorded by a SettingsChanged event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from domain.errors import InvalidSettings

DEFAULT_MAX_ENTRY_BYTES = 1 << 20
MAX_LABELS = 64


@dataclass(frozen=True, slots=True)
class PruningPolicy:
    mode: str = "off"
    ttl_seconds: int = 300
    keep_last_assistants: int = 3
    soft_trim_ratio: float = 0.3
    hard_clear_ratio: float = 0.5
    min_prunable_tool_chars: int = 50_000
    soft_trim_max_chars: int = 4_000
    soft_trim_head_chars: int = 1_500
    soft_trim_tail_chars: int = 1_500

    def validate(self) -> None:
        if self.mode not in ("off", "cache-ttl"):
            raise InvalidSettings(f"pruning.mode must be 'off' or 'cache-ttl', not {self.mode!r}")
        for name in ("soft_trim_ratio", "hard_clear_ratio"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise InvalidSettings(f"pruning.{name} must be in (0, 1], not {value}")
        _require_non_negative(self, "pruning")


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    threshold_ratio: float = 0.8
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000
    summarizer_model: str = ""
    identifier_policy: str = "preserve"

    def validate(self) -> None:
        if not 0 < self.threshold_ratio <= 1:
            raise InvalidSettings(
                f"compaction.threshold_ratio must be in (0, 1], not {self.threshold_ratio}"
            )
        if self.identifier_policy not in ("preserve", "anonymize", "custom"):
            raise InvalidSettings(
                "compaction.identifier_policy must be 'preserve', 'anonymize' or 'custom', "
                f"not {self.identifier_policy!r}"
            )
        _require_non_negative(self, "compaction")


@dataclass(frozen=True, slots=True)
class SessionSettings:
    model: str = ""
    # 0 means "not set on the session": resolved from config or model metadata.
    context_window_tokens: int = 0
    max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES
    title: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    pruning: PruningPolicy = PruningPolicy()
    compaction: CompactionPolicy = CompactionPolicy()

    def __deepcopy__(self, memo: dict[int, Any]) -> SessionSettings:
        return self  # immutable, and its read-only labels cannot be deep-copied

    def validate(self, max_entry_bytes_limit: int | None = None) -> None:
        """Refuses settings no session could work with.

        ``max_entry_bytes_limit`` is the most the server can take in one entry
        (its message size limit): a larger setting would promise what the
        transport refuses.
        """
        if self.context_window_tokens < 0:
            raise InvalidSettings("context_window_tokens must be 0 (resolve) or positive")
        if self.max_entry_bytes <= 0:
            raise InvalidSettings("max_entry_bytes must be positive")
        if max_entry_bytes_limit is not None and self.max_entry_bytes > max_entry_bytes_limit:
            raise InvalidSettings(
                f"max_entry_bytes {self.max_entry_bytes:,} is over this server's limit of "
                f"{max_entry_bytes_limit:,} bytes (one gRPC message); choose a smaller value"
            )
        if len(self.title) > 500:
            raise InvalidSettings("title is longer than 500 characters")
        if len(self.labels) > MAX_LABELS:
            raise InvalidSettings(f"at most {MAX_LABELS} labels")
        self.pruning.validate()
        self.compaction.validate()

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["labels"] = dict(self.labels)
        data["pruning"] = dataclasses.asdict(self.pruning)
        data["compaction"] = dataclasses.asdict(self.compaction)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionSettings:
        return cls(
            **{k: v for k, v in data.items() if k not in ("labels", "pruning", "compaction")},
            labels=MappingProxyType(dict(data.get("labels", {}))),
            pruning=PruningPolicy(**data.get("pruning", {})),
            compaction=CompactionPolicy(**data.get("compaction", {})),
        )


def _require_non_negative(policy: Any, prefix: str) -> None:
    for f in dataclasses.fields(policy):
        value = getattr(policy, f.name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise InvalidSettings(f"{prefix}.{f.name} must not be negative")
