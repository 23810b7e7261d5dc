"""What the offline summariser recognises in text: paths, names, ids, errors, constraints.

Regular expressions and the small readers built on them, shared by fact
gathering and anonymisation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from domain.context.summary.layout import clip

EXTENSIONS = (
    "py|pyi|ts|tsx|js|jsx|mjs|cjs|json|jsonl|md|toml|yaml|yml|rs|go|java|kt|c|h|cc|cpp|hpp|"
    "cs|rb|php|swift|sh|bash|zsh|ps1|css|scss|html|sql|txt|lock|cfg|ini|env|proto|xml|csv"
)
# Chinese (fullwidth) space, commas, stops, colons, question marks, brackets.
_CJK_PUNCTUATION = r"\u3000\uff0c\u3002\u3001\uff1b\uff1a\uff01\uff1f\uff08\uff09\u3010\u3011"
_ROOTED_SEGMENT = r"[^\s/\\\"'`<>|,;" + _CJK_PUNCTUATION + "]"
_SEGMENT = r"[A-Za-z0-9_.@+-]"
# A path: rooted (/, ~/, ./, C:\) with segments of any letters, or relative in ASCII (so a
# path written against Chinese text, "修改src/app.py中", is found without its neighbours).
PATH = re.compile(
    r"(?<![A-Za-z0-9_/\\.-])(?:[A-Za-z]:[\\/]|~/|\.{1,2}/|/)(?:"
    + _ROOTED_SEGMENT
    + r"+[\\/])*"
    + _ROOTED_SEGMENT
    + r"*?\.(?:"
    + EXTENSIONS
    + r")(?![A-Za-z0-9_])"
    + r"|(?<![A-Za-z0-9_/\\.-])(?:"
    + _SEGMENT
    + r"+[\\/])*"
    + _SEGMENT
    + r"+\.(?:"
    + EXTENSIONS
    + r")(?![A-Za-z0-9_])",
    re.ASCII,
)
BACKTICKED = re.compile(r"`([A-Za-z_][\w.:-]{2,60})`", re.ASCII)
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


@dataclass(frozen=True)
class Phrases:
    """Phrases found in any case as whole words, or words of a script without case (Chinese,
    Japanese) found as written: :meth:`search` is ``pattern.search``, sooner.

    The pattern is tried at every position of a text. Most text is ASCII and holds none of
    the phrases, which a substring test of its lower case tells some ten times faster. That
    test is exact for ASCII text alone: elsewhere IGNORECASE folds letters that ``lower``
    does not (the long s, U+017F, is an s; the dotless and the dotted I, U+0131 and U+0130,
    are i's), and the other words may be there.
    """

    phrases: tuple[str, ...]
    pattern: re.Pattern[str]

    def search(self, text: str) -> re.Match[str] | None:
        if text.isascii():
            lowered = text.lower()
            if not any(phrase in lowered for phrase in self.phrases):
                return None
        return self.pattern.search(text)


def _phrases(
    phrases: str, edge_before: str, edge_after: str, others: str, apostrophes: str = "'"
) -> Phrases:
    """``phrases`` (lower case, separated by "|") between the edges, their apostrophe any of
    ``apostrophes``; or ``others``, a pattern."""
    listed = tuple(phrases.split("|"))
    apostrophe = f"[{apostrophes}]" if len(apostrophes) > 1 else apostrophes
    written = "|".join(re.escape(p).replace("'", apostrophe) for p in listed)
    pattern = re.compile(f"{edge_before}(?:{written}){edge_after}|{others}", re.IGNORECASE)
    return Phrases(listed, pattern)


CONSTRAINT = _phrases(
    "must|must not|mustn't|don't|do not|never|always|only|without|avoid|make sure|"
    "should|shouldn't|need to|prefer|keep",
    r"\b",
    r"\b",
    "しないで|だけ|必ず|禁止",
)
DECISION = _phrases(
    "decided|decide|decision|instead|chose|choose|switch to|switched to|going with|"
    "will use|we'll use|i'll use|approach|plan is|root cause|the fix",
    r"\b",
    r"\b",
    "にする|に決め",
)
# An explicit instruction: what the user asks to be remembered, always or never done.
INSTRUCTION = _phrases(
    "remember|always|never|don't|do not|must|mustn't|make sure|keep in mind|note that|from now on",
    "(?<![A-Za-z])",
    "(?![A-Za-z])",
    "记住|记得|始终|总是|永远|不要|必须|务必|一定要|以后|覚えて|必ず|絶対に|しないで"
    # 别 is "don't" alone, not in 特别 (especially), 区别 (difference), 别人 (others) ...
    "|(?<![特区分类级识告个差派性职辨鉴判])别(?![人的名处])",
    apostrophes="'\u2019",
)
# The longest instruction kept whole; a longer one is clipped.
INSTRUCTION_CHARS = 500
SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])|\n+")
FENCE = re.compile(r"```.*?```", re.DOTALL)
TAG = re.compile(r"<[^>\n]{1,80}>")
# An error a user states: quoted, or named by its type or code within a line.
_ERROR_WORDS = re.compile(
    r"(?i:error|exception|traceback|failed|failure|fatal|panic|denied|not found|no such|"
    r"refused|timed out|timeout|invalid|cannot|can't|unable|unexpected|segmentation fault|"
    r"killed|out of memory|errno|enoent|eacces)|报错|错误|异常|失败|超时|拒绝"
)
_QUOTED_TEXT = re.compile(
    r'"([^"\n]{3,300})"|“([^”\n]{3,300})”|「([^」\n]{3,300})」|『([^』\n]{3,300})』'
    r"|(?<![\w])'([^'\n]{3,300})'(?![\w])|`([^`\n]{3,300})`"
)
_STATED_ERROR = re.compile(
    # TypeError: ..., java.io.IOException: ...
    r"(?<![A-Za-z0-9_])[A-Za-z_.]*(?:Error|Exception)\b\s*[:(]"
    # error: ..., psql: error: ..., error[E0308]: ..., error TS2345: ..., fatal: ...,
    # and MySQL's ERROR 1213 (40001): ...
    r"|(?<![A-Za-z0-9_])(?:[A-Za-z][\w.-]*:\s)?(?i:error|fatal|panic)"
    r"(?:\[\w+\]|\s+[A-Z]*\d+(?:\s*\(\w+\))?)?\s*:"
    r"|(?<![A-Za-z])E(?:NOENT|ACCES|PERM|CONNREFUSED|CONNRESET|ADDRINUSE|TIMEDOUT|EXIST|"
    r"NOTDIR|ISDIR|NOSPC|PIPE|AGAIN|NOTFOUND)(?![A-Za-z])",
    re.ASCII,
)
# Where an error named in prose ends: a new sentence, or Chinese punctuation.
_ERROR_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\u4e00-\u9fff])|[\uff0c\u3002\uff01\uff1f\uff1b]")
ERROR_CHARS = 300


# Substring tests that tell most text holds no match of a pattern, much faster than the
# pattern, which is tried at every position (of every line) of the text.


def _may_name_error(text: str) -> bool:
    """False when no line of ``text`` matches _STATED_ERROR: each match holds a capital E
    (``...Error``, ``...Exception``, ``ENOENT``) or an ASCII "error", "fatal" or "panic"
    in any case."""
    if "E" in text:
        return True
    lowered = text.lower()
    return "error" in lowered or "fatal" in lowered or "panic" in lowered


_QUOTE_OPENINGS = ('"', "\u201c", "\u300c", "\u300e", "'", "`")


def _may_quote(text: str) -> bool:
    """False when ``text`` holds no match of _QUOTED_TEXT: each opens with one of these."""
    return any(quote in text for quote in _QUOTE_OPENINGS)


def clean(text: str) -> str:
    text = TAG.sub(" ", FENCE.sub(" ", text))
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, whitespace collapsed and list bullets dropped."""
    return [BULLET.sub("", " ".join(s.split())) for s in SENTENCE.split(text)]


def instructions_in(text: str) -> list[str]:
    """The sentences of ``text`` that instruct: "Remember ...", "Never ...", "不要 ...".

    A sentence that ends in a colon ("Keep in mind:") introduces the next one,
    which is kept with it.
    """
    return instructions_among(sentences(text))


def instructions_among(parts: list[str]) -> list[str]:
    """:func:`instructions_in` the text whose :func:`sentences` are ``parts``."""
    found = []
    i = 0
    while i < len(parts):
        sentence = parts[i]
        if INSTRUCTION.search(sentence):
            while sentence.endswith((":", "\uff1a")) and i + 1 < len(parts):
                i += 1
                sentence = f"{sentence} {parts[i]}".strip()
            if len(sentence) >= 4:
                found.append(clip(sentence, INSTRUCTION_CHARS))
        i += 1
    return found


def stated_errors(text: str) -> list[str]:
    """Error messages stated in ``text``: those named by their type or code in a line
    (``TypeError: ...``, ``psql: error: ...``, ``ENOENT``), to their closing quote when
    quoted, else to the end of their sentence (the first and the last of them when
    there are more than two); then quoted ones that read as errors ("connection
    refused")."""
    found: list[str] = []
    lines = text.splitlines() if _may_name_error(text) else []
    for line in lines:
        named = _STATED_ERROR.search(line)
        if named:
            error = _quoted_to_end(line, named.start())
            if error is None:
                error = _ERROR_END.split(line[named.start() :], maxsplit=1)[0]
            found.append(clip(" ".join(error.split()), ERROR_CHARS))
    if len(found) > 2:
        # Many error lines in one message are a pasted log: its first and last say it.
        found = [found[0], found[-1]]
    quotes = _QUOTED_TEXT.finditer(text) if _may_quote(text) else []
    for match in quotes:
        quoted = next(g for g in match.groups() if g is not None).strip()
        if _ERROR_WORDS.search(quoted) and not any(quoted in error for error in found):
            found.append(clip(quoted, ERROR_CHARS))
    return list(dict.fromkeys(found))


# Quote pairs an error may be written in: (opening, closing).
_QUOTES = (('"', '"'), ("`", "`"), ("\u201c", "\u201d"), ("\u300c", "\u300d"))


def _quoted_to_end(line: str, start: int) -> str | None:
    """The error starting at ``start`` up to the quote that closes it, when a quote opened
    before it is still open; None when it is not quoted. The last closing quote of the
    line ends it, so quotes inside the message (``role "svc" does not exist``) stay."""
    before = line[:start]
    for opening, closing in _QUOTES:
        still_open = (
            before.count(opening) % 2 == 1
            if opening == closing
            else before.count(opening) > before.count(closing)
        )
        end = line.rfind(closing)
        if still_open and end > start:
            return line[start:end]
    return None


def pasted_errors(text: str) -> list[str]:
    """The first and the last error line of pasted output (a log, a traceback)."""
    if not _may_name_error(text):
        return []
    lines = [
        clip(line.strip(), ERROR_CHARS) for line in text.splitlines() if _STATED_ERROR.search(line)
    ]
    return list(dict.fromkeys(lines[:1] + lines[-1:]))


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
