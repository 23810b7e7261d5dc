"""What the offline summariser recognises in text: paths, names, ids, errors, constraints.

Regular expressions and the small readers built on them, shared by fact
gathering and anonymisation.
"""

from __future__ import annotations

import json
import re

from domain.context.summary.layout import clip

_EXTENSIONS = (
    "py|pyi|ts|tsx|js|jsx|mjs|cjs|json|jsonl|md|toml|yaml|yml|rs|go|java|kt|c|h|cc|cpp|hpp|"
    "cs|rb|php|swift|sh|bash|zsh|ps1|css|scss|html|sql|txt|lock|cfg|ini|env|proto|xml|csv"
)
PATH = re.compile(
    r"(?<![\w/\\.-])(?:[A-Za-z]:[\\/]|~/|\.{1,2}/|/)?(?:[\w.@-]+[\\/])+[\w.@-]*\.(?:"
    + _EXTENSIONS
    + r")\b"
    + r"|(?<![\w/\\.-])[\w-]+\.(?:"
    + _EXTENSIONS
    + r")\b"
)
# "def name(", "class Name:", "function name", "name()": a keyword-named word counts when
# followed by code punctuation or shaped like code ("the type in" is prose).
FUNCTION = re.compile(
    r"\b(?:def|function|fn|func|class|interface|type)\s+([A-Za-z_]\w*)(\s*[(<:{])?"
    r"|\b([A-Za-z_][\w.]*)\(\)"
)
BACKTICKED = re.compile(r"`([A-Za-z_][\w.:-]{2,60})`")
HEX_ID = re.compile(r"(?<![\w<-])(?=[0-9a-f-]*\d)[0-9a-f]{8}(?:-?[0-9a-f]{4,})*(?![\w-])")
_ERROR_LINE = re.compile(
    r"\b(?:error|exception|traceback|failed|failure|fatal|panic|denied|not found|enoent|"
    r"eacces|errno)\b",
    re.IGNORECASE,
)
# An error named by its type or code: "ValueError:", "error TS2345", "ENOENT", "errno 2".
_ERROR_NAMED = re.compile(
    r"\b\w*(?:Error|Exception)\s*[:(]|\b[Ee]rror\s*:|\berror\s+[A-Z]+\d+|\bE[A-Z]{3,}\b|"
    r"\b[Ee]rrno\b|^(?:[Ee]rror|[Ff]atal|[Pp]anic|ERROR|FATAL|PANIC)\b"
)
BULLET = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
# A backticked word is an identifier when it looks like code: camelCase, snake_case,
# dotted, namespaced, a call, or with digits.
CODE_LIKE = re.compile(r"[a-z][A-Z]|_|\.|::|\(\)|\d")
CONSTRAINT = re.compile(
    r"\b(?:must|must not|mustn't|don't|do not|never|always|only|without|avoid|make sure|"
    r"should|shouldn't|need to|prefer|keep)\b|しないで|だけ|必ず|禁止",
    re.IGNORECASE,
)
DECISION = re.compile(
    r"\b(?:decided|decide|decision|instead|chose|choose|switch(?:ed)? to|going with|"
    r"will use|we'll use|i'll use|approach|plan is|root cause|the fix)\b|にする|に決め",
    re.IGNORECASE,
)
SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])|\n+")
FENCE = re.compile(r"```.*?```", re.DOTALL)
_TAG = re.compile(r"<[^>\n]{1,80}>")


def clean(text: str) -> str:
    text = _TAG.sub(" ", FENCE.sub(" ", text))
    return " ".join(text.split())


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return clip(line.strip(), 120)
    return "(empty)"


def error_line(text: str) -> str:
    """The line that says what went wrong: a JSON error field, else the first line naming
    an error type or code, else the first line mentioning an error, else the first line."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if isinstance(data, dict):
            for key in ("error", "message", "stderr"):
                if isinstance(data.get(key), str) and data[key].strip():
                    return clip(data[key].strip().splitlines()[0], 200)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern in (_ERROR_NAMED, _ERROR_LINE):
        for line in lines:
            if pattern.search(line):
                return clip(line, 200)
    return first_line(text)
