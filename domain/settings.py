"""A session's settings and context-management policies, with their defaults.

The defaults are the ones OpenClaw's engine ships with (docs/context-management.md
lists them). Settings are immutable; a change is a new value recorded by a
SettingsChanged event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from domain.errors import InvalidSettings, quoted
from domain.stored_fields import known_fields

DEFAULT_MAX_ENTRY_BYTES = 1 << 20
MAX_LABELS = 64
MAX_TOOL_NAME_CHARS = 128
MAX_SUMMARIZER_STEPS = 8
MAX_RETRIEVAL_TOP_K = 20
# Settings are stored with this format number. Format 1 (no number) stored every
# budget as a fixed figure; format 2 stores 0 for "derived from the window".
SETTINGS_FORMAT = 2


PRUNING_MODES = ("off", "cache-ttl", "recent-n")
COMPACTION_MODES = ("auto", "manual", "off")
IDENTIFIER_POLICIES = ("preserve", "anonymize", "custom")


@dataclass(frozen=True, slots=True)
class WindowGuardPolicy:
    """SPEC 3.1: refuse prompt views for windows too small to work in, warn for small ones."""

    enabled: bool = True
    hard_min_tokens: int = 16_000
    warn_below_tokens: int = 32_000

    def validate(self) -> None:
        # Checked whether or not the guard is on: enabling it later changes nothing else.
        if not 0 < self.hard_min_tokens <= self.warn_below_tokens:
            raise InvalidSettings(
                f"window_guard.hard_min_tokens ({self.hard_min_tokens:,}) must be positive and "
                f"at most window_guard.warn_below_tokens ({self.warn_below_tokens:,}): set both "
                "so that a window below the first is refused and below the second warned of"
            )


@dataclass(frozen=True, slots=True)
class ToolResultGuardPolicy:
    """SPEC 3.2: how large one tool result may show in the prompt, in tokens."""

    enabled: bool = True
    # 0: no cap in characters; the cap in tokens (live_cap_tokens) applies.
    live_cap_chars: int = 0
    # A result never shows more than this share of the window.
    max_window_share: float = 0.3
    min_keep_chars: int = 2_000
    tail_share: float = 0.3
    max_tail_chars: int = 4_000
    # 0: never; else a result over this share of the window is left out whole.
    placeholder_window_share: float = 0.0
    # 0: derived from the window, max(4,000, window / 20) (and max_window_share).
    live_cap_tokens: int = 0
    # The tool the agent's runtime offers to read an entry back, named in the notice.
    read_back_tool: str = ""

    def validate(self) -> None:
        for name in ("max_window_share", "tail_share"):
            _require_ratio(self, "tool_result_guard", name)
        if not 0 <= self.placeholder_window_share <= 1:
            raise InvalidSettings(
                "tool_result_guard.placeholder_window_share must be in [0, 1] (0: never), not "
                f"{self.placeholder_window_share}"
            )
        _require_non_negative(self, "tool_result_guard")
        if len(self.read_back_tool) > MAX_TOOL_NAME_CHARS:
            raise InvalidSettings(
                f"tool_result_guard.read_back_tool is over {MAX_TOOL_NAME_CHARS} characters"
            )


@dataclass(frozen=True, slots=True)
class PruningPolicy:
    """SPEC 3.4 (cache-ttl) and QwenPaw's byte caps by recency (recent-n)."""

    mode: str = "off"
    ttl_seconds: int = 300
    keep_last_assistants: int = 3
    soft_trim_ratio: float = 0.3
    hard_clear_ratio: float = 0.5
    min_prunable_tool_chars: int = 50_000
    soft_trim_max_chars: int = 4_000
    soft_trim_head_chars: int = 1_500
    soft_trim_tail_chars: int = 1_500
    recent_n: int = 2
    recent_max_bytes: int = 50_000
    old_max_bytes: int = 3_000
    # Tool-name globs; a result is prunable when allowed and not denied (deny wins).
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()

    def validate(self) -> None:
        _require_choice(self.mode, PRUNING_MODES, "pruning.mode")
        for name in ("soft_trim_ratio", "hard_clear_ratio"):
            _require_ratio(self, "pruning", name)
        _require_non_negative(self, "pruning")


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """SPEC 3.3: when to compact, what to keep, and who writes the summary.

    Token figures left at 0 are derived from the window (domain.context.budget)."""

    threshold_ratio: float = 0.8
    # Room for the model's answer; 0: min(16,384, window / 8).
    reserve_tokens: int = 0
    # The newest entries a compaction keeps; 0: window / 10.
    keep_recent_tokens: int = 0
    # Empty: the offline summariser, which needs no model, key or network.
    summarizer_model: str = ""
    identifier_policy: str = "preserve"
    # auto: on threshold, overflow and request; manual: on overflow and request; off: only
    # on request (an overflow is recorded, and what it stated learned, but nothing compacted).
    mode: str = "auto"
    # Free after a compaction, at least; 0: min(20,000, window / 4).
    reserve_floor_tokens: int = 0
    summarizer_api_base: str = ""
    # 0: resolved from the summariser model's metadata.
    summarizer_window_tokens: int = 0
    # With identifier_policy "custom": how to treat identifiers, in the summariser's prompt.
    identifier_instructions: str = ""
    timeout_seconds: int = 300
    max_attempts: int = 3
    max_history_share: float = 0.8
    # What a summary may take; 0: min(4,096, window / 5).
    summary_max_tokens: int = 0
    # The summarisers tried in order until one writes a summary that fits (see
    # domain.context.chain); empty: summarizer_model if set, then offline, then the
    # hard drop, which always lands and ends every chain.
    summarizers: tuple[str, ...] = ()
    # One step of the chain (retries included) gives up after this long.
    step_timeout_seconds: int = 60

    def validate(self) -> None:
        _require_ratio(self, "compaction", "threshold_ratio")
        _require_ratio(self, "compaction", "max_history_share")
        _require_choice(self.mode, COMPACTION_MODES, "compaction.mode")
        _require_choice(self.identifier_policy, IDENTIFIER_POLICIES, "compaction.identifier_policy")
        _require_non_negative(self, "compaction")
        if self.max_attempts < 1:
            raise InvalidSettings("compaction.max_attempts must be at least 1")
        if self.step_timeout_seconds < 1:
            raise InvalidSettings("compaction.step_timeout_seconds must be at least 1")
        if len(self.summarizers) > MAX_SUMMARIZER_STEPS:
            raise InvalidSettings(
                f"compaction.summarizers lists {len(self.summarizers)} steps; at most "
                f"{MAX_SUMMARIZER_STEPS}"
            )
        for step in self.summarizers:
            if not step.strip() or len(step) > 256:
                raise InvalidSettings(
                    f"compaction.summarizers: {quoted(step)} is not a summariser; name a "
                    "model (e.g. openai/gpt-4o-mini or openai/gpt-4o-mini@local), "
                    "'conversation', 'offline' or 'hard-drop'"
                )


@dataclass(frozen=True, slots=True)
class MemoryPolicy:
    """Long-term memory over the whole raw history (seed 001): how Recall searches
    and whether the prompt view retrieves from it."""

    # A litellm embedding model: Recall searches by meaning too. Empty: full text only.
    embedding_model: str = ""
    embedding_api_base: str = ""
    # The prompt view holds the best this many recalled hits for the newest user
    # turn, in a marked context block; 0: off.
    retrieval_top_k: int = 0
    # An embedding call gives up after this long; the search is then full text.
    embedding_timeout_seconds: int = 10

    def validate(self) -> None:
        _require_non_negative(self, "memory")
        if self.retrieval_top_k > MAX_RETRIEVAL_TOP_K:
            raise InvalidSettings(
                f"memory.retrieval_top_k must be at most {MAX_RETRIEVAL_TOP_K}, "
                f"not {self.retrieval_top_k}"
            )
        if self.embedding_timeout_seconds < 1:
            raise InvalidSettings("memory.embedding_timeout_seconds must be at least 1")
        if len(self.embedding_model) > 256:
            raise InvalidSettings("memory.embedding_model is longer than 256 characters")


_POLICIES: dict[str, type] = {
    "window_guard": WindowGuardPolicy,
    "tool_result_guard": ToolResultGuardPolicy,
    "pruning": PruningPolicy,
    "compaction": CompactionPolicy,
    "memory": MemoryPolicy,
}


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
    # The context engine that manages the prompt, by name.
    engine: str = "layered"
    window_guard: WindowGuardPolicy = WindowGuardPolicy()
    tool_result_guard: ToolResultGuardPolicy = ToolResultGuardPolicy()
    # Injected system prompt files are cut to this many characters each (seed 004).
    max_system_file_chars: int = 20_000
    memory: MemoryPolicy = MemoryPolicy()

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
        if self.max_system_file_chars < 0:
            raise InvalidSettings("max_system_file_chars must not be negative")
        for name in _POLICIES:
            getattr(self, name).validate()

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["labels"] = dict(self.labels)
        for name in _POLICIES:
            data[name] = dataclasses.asdict(getattr(self, name))
        data["format"] = SETTINGS_FORMAT
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionSettings:
        """Settings from their stored form (domain.stored_fields: another release's)."""
        data = dict(data)
        if data.pop("format", 1) < SETTINGS_FORMAT:
            data = _derived_where_fixed(data)
        plain = known_fields(cls, data)
        return cls(
            **{k: v for k, v in plain.items() if k != "labels" and k not in _POLICIES},
            labels=MappingProxyType(dict(data.get("labels", {}))),
            **{
                name: _policy_from_dict(kind, data.get(name, {}))
                for name, kind in _POLICIES.items()
            },
        )


# Format 1 stored these built-in figures for every session; they were never a
# choice, so they read as "derived from the window", which format 2 stores as 0.
_FORMAT_1_DEFAULTS: dict[str, dict[str, object]] = {
    "compaction": {
        "reserve_tokens": 16_384,
        "keep_recent_tokens": 20_000,
        "reserve_floor_tokens": 20_000,
        "summary_max_tokens": 4_096,
    },
    "tool_result_guard": {"live_cap_chars": 16_000, "placeholder_window_share": 0.5},
}


def _derived_where_fixed(data: dict[str, Any]) -> dict[str, Any]:
    for policy, defaults in _FORMAT_1_DEFAULTS.items():
        stored = data.get(policy)
        if isinstance(stored, Mapping):
            data[policy] = {
                key: (0 if defaults.get(key) == value else value) for key, value in stored.items()
            }
    return data


def _policy_from_dict(kind: type, data: Mapping[str, Any]) -> Any:
    # JSON has no tuples: the glob lists come back as lists.
    known = known_fields(kind, data)
    return kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in known.items()})


def _require_choice(value: str, choices: tuple[str, ...], name: str) -> None:
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise InvalidSettings(f"{name} must be one of {allowed}, not {quoted(value)}")


def _require_ratio(policy: Any, prefix: str, name: str) -> None:
    value = getattr(policy, name)
    if not 0 < value <= 1:
        raise InvalidSettings(f"{prefix}.{name} must be in (0, 1], not {value}")


def _require_non_negative(policy: Any, prefix: str) -> None:
    for f in dataclasses.fields(policy):
        value = getattr(policy, f.name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise InvalidSettings(f"{prefix}.{f.name} must not be negative")
