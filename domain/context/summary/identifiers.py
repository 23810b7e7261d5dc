"""Identifiers in text: what a summary must keep exactly as written.

:func:`find_identifiers` reads ticket and issue ids (``INC-48213``, ``#4711``,
``owner/repo#12``), URLs, e-mail addresses, UUIDs and hex ids, hashes (git
short and long, ``sha256:...``), paths, hosts with ports and IP addresses,
version strings, numbers with units (``420 ms``, ``3.5 GB``, ``99.9%``,
``12 req/s``, ``$1,200``), function and class names, and short quoted
literals. Each span of text belongs to one identifier: the patterns are tried
most specific first, and a later one never takes part of a span already taken
(``https://x.io/a.py`` is a URL, not a path).

Word boundaries are ASCII ones, so an identifier written against Chinese or
Japanese text (``记住INC-48213``) is found whole.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from domain.context.summary.patterns import BACKTICKED, CODE_LIKE, EXTENSIONS, PATH

# Not part of an ASCII word on the left / right. Every pattern here is ASCII-only
# (re.ASCII): \w and \d never take a Chinese character as part of an identifier.
EDGE_BEFORE = r"(?<![A-Za-z0-9_])"
EDGE_AFTER = r"(?![A-Za-z0-9_])"
# EDGE_BEFORE checked after a pattern's first character, not before it: a pattern that starts
# with a character class is searched for much faster than one that starts with a
# lookbehind, which is tried at every position of the text.
_AFTER_FIRST = r"(?<![A-Za-z0-9_].)"

# Kinds replaced by a placeholder under the ``anonymize`` policy. Versions,
# quantities, type names (``ValueError``, ``PostgreSQL``) and quoted literals say
# nothing about who or where: they stay.
ANONYMIZED = frozenset({"url", "email", "ticket", "id", "hash", "path", "host", "name"})

PLACEHOLDER = re.compile(r"<(?:" + "|".join(sorted(ANONYMIZED)) + r")-[0-9a-f]{8}>", re.ASCII)
_URL = re.compile(
    r"(?<![\w/])(?:https?|ftp|wss?|ssh|git|s3|gs|file)://[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+",
    re.ASCII,
)
_EMAIL = re.compile(
    r"[A-Za-z0-9._%+-]"
    + _AFTER_FIRST
    + r"[A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"
    + EDGE_AFTER,
    re.ASCII,
)
_UUID = re.compile(
    r"[0-9a-fA-F]"
    + _AFTER_FIRST
    + r"[0-9a-fA-F]{7}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    + EDGE_AFTER,
    re.ASCII,
)
# Hex ids in dashed groups (3f9a2c1d-77aa), with a digit; a UUID is one of them.
_DASHED_ID = re.compile(
    r"[0-9a-f](?<![A-Za-z0-9_<-].)[0-9a-f]{7}(?:-[0-9a-f]{4,})+(?![A-Za-z0-9_-])", re.ASCII
)
# Git short and long hashes, digests: hex with at least one digit and one letter.
_HASH = re.compile(r"[0-9a-f]" + _AFTER_FIRST + r"[0-9a-f]{6,127}" + EDGE_AFTER, re.ASCII)
_DIGEST = re.compile(r"(?:sha1|sha256|sha512|md5):[0-9a-f]{7,128}" + EDGE_AFTER, re.ASCII)
# INC-48213, JIRA-12, GH-123, CVE-2024-3094; #4711; owner/repo#12.
_TICKET = re.compile(r"[A-Z]" + _AFTER_FIRST + r"[A-Z0-9]{1,11}(?:-\d+)+" + EDGE_AFTER, re.ASCII)
_ISSUE = re.compile(
    r"(?<![\w/.-])[\w.-]+/[\w.-]+#\d+" + EDGE_AFTER + r"|(?<![\w&#])#\d+" + EDGE_AFTER, re.ASCII
)
# Letters and digits joined by a dash that are not ids.
_NOT_TICKETS = frozenset({"UTF", "SHA", "ISO", "MD", "AES", "RSA", "TLS", "SSL", "HTTP", "IPV"})
_IP = re.compile(
    EDGE_BEFORE + r"(?<!\.)\d{1,3}(?:\.\d{1,3}){3}(?::\d{2,5})?(?!\.?\d)" + EDGE_AFTER, re.ASCII
)
# host:port, found from its port: the host is read backwards from the colon.
_PORT = re.compile(r":\d{2,5}" + EDGE_AFTER, re.ASCII)
# A directory path: rooted (/, ~/, ./, C:\) with two segments or more, or ending in "/".
_DIRECTORY = re.compile(
    r"(?<![\w/\\.:-])(?:(?:~|\.{1,2})?/|[A-Za-z]:\\)(?:[A-Za-z0-9_.@+-]+[\\/])+[A-Za-z0-9_.@+-]*"
    r"|(?<![\w/\\.:-])[A-Za-z0-9_.@+-]+/(?:[A-Za-z0-9_.@+-]+/)+",
    re.ASCII,
)
# 1.2.3, v1.2.3-rc.1, v1.2; pinned (requests==2.31.0, node@20.1); named (Python 3.12).
_SEMVER = re.compile(
    r"(?<![A-Za-z0-9_.])v?\d+(?:\.\d+){2,}(?:[-+][0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?"
    + EDGE_AFTER
    + r"|(?<![A-Za-z0-9_.])v\d+\.\d+"
    + EDGE_AFTER,
    re.ASCII,
)
_PINNED = re.compile(
    r"[A-Za-z]"
    + _AFTER_FIRST
    + r"[\w.-]*(?:==|>=|<=|~=|@)\d+(?:\.\d+)*(?:[-+][0-9A-Za-z.]+)?"
    + EDGE_AFTER,
    re.ASCII,
)
_NAMED_VERSION = re.compile(
    r"(?i:(?<![A-Za-z])(?:version|release|python|node|java|go|rust|postgres(?:ql)?)\s*)"
    r"(\d+(?:\.\d+)+)" + EDGE_AFTER,
    re.ASCII,
)
_UNITS = (
    r"ns|µs|us|ms|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|"
    r"years?|[KMGTP]i?B|[kK]B|bytes?|[KMG]bps|bps|req/s|reqs?/s|requests?/s|rps|qps|ops/s|"
    r"tokens?/s|[KMG]B/s|tokens?|Hz|kHz|MHz|GHz|px|rpm|°C|°F|x|USD|EUR|GBP|CNY|RMB|k|K|M|"
    r"lines|rows|requests|retries|errors|users|files|tests|turns|entries|calls|cores|"
    r"replicas|nodes|pods|workers|threads|connections"
)
_CJK_UNITS = "毫秒|秒钟|秒|分钟|小时|天|周|个月|年|元|美元|万|亿|次|条|行|个"
_NUMBER = r"\d(?<![A-Za-z0-9_.,]\d)(?:\d{0,2}(?:,\d{3})+(?:\.\d+)?|\d*(?:\.\d+)?)"
_MONEY = re.compile(
    r"(?<![A-Za-z0-9_.,])[$€£¥]\d[\d,]*(?:\.\d+)?(?:\s?(?:[kKMB]|bn|million|billion))?"
    + EDGE_AFTER,
    re.ASCII,
)
_QUANTITY = re.compile(
    _NUMBER + r"(?:%|\s?(?:" + _UNITS + r")" + EDGE_AFTER + r"|\s?(?:" + _CJK_UNITS + r"))",
    re.ASCII,
)
# "def name(", "class Name:", "function name": a keyword-named word counts when followed
# by code punctuation or shaped like code ("the type in" is prose).
_DECLARED = re.compile(
    r"(?:def|function|fn|func|class|interface|type)\s+([A-Za-z_][A-Za-z0-9_]*)(\s*[(<:{])?",
    re.ASCII,
)
_CALLED = re.compile(r"\(\)")
# Code-shaped words: snake_case, SCREAMING_CASE, _private; camelCase.
_SNAKE_WORD = re.compile(
    r"[A-Za-z_]" + _AFTER_FIRST + r"(?:(?<=[A-Za-z])[A-Za-z0-9]*(?:_[A-Za-z0-9]+)+"
    r"|(?<=_)[A-Za-z0-9_]{2,})" + EDGE_AFTER,
    re.ASCII,
)
_CAMEL_WORD = re.compile(
    r"[a-z]" + _AFTER_FIRST + r"[a-z]*[A-Z][A-Za-z0-9]*" + EDGE_AFTER, re.ASCII
)
# PascalCase with two humps or more: type and product names.
_TYPE_WORD = re.compile(
    r"[A-Z]" + _AFTER_FIRST + r"[a-z0-9]+(?:[A-Z][a-z0-9]*)+" + EDGE_AFTER, re.ASCII
)
# Dotted names: module.function, obj.method, host.example.com (each part two letters or more).
_DOTTED = re.compile(
    r"[A-Za-z_]" + _AFTER_FIRST + r"[A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]+)+" + EDGE_AFTER,
    re.ASCII,
)
_QUOTED = re.compile(
    r'"([^"\n]{2,80})"|“([^”\n]{2,80})”|「([^」\n]{2,80})」|『([^』\n]{2,80})』'
    r"|(?<![\w])'([^'\n]{2,80})'(?![\w])|`([^`\n]{2,80})`",
    re.ASCII,
)


@dataclass(frozen=True, slots=True)
class Found:
    kind: str
    value: str
    start: int


_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_CHARS = _NAME_START | frozenset("0123456789.")
_HOST_CHARS = (_NAME_START - {"_"}) | frozenset("0123456789.-")

# What a pattern's match holds: (where the identifier starts, the identifier); "" for none.
_Span = tuple[int, str]


def _whole(match: re.Match[str]) -> _Span:
    return match.start(), match.group(0)


def _group(match: re.Match[str]) -> _Span:
    return match.start(1), match.group(1)


def _url(match: re.Match[str]) -> _Span:
    url = match.group(0).rstrip(".,;:!?'")
    # A closing bracket belongs to the URL only when the URL opened one.
    while url[-1:] in ")]" and url.count(url[-1]) > url.count("(" if url[-1] == ")" else "["):
        url = url[:-1].rstrip(".,;:!?'")
    return match.start(), url


def _hash(match: re.Match[str]) -> _Span:
    value = match.group(0)
    hexadecimal = any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    return match.start(), value if hexadecimal else ""


def _dashed(match: re.Match[str]) -> _Span:
    value = match.group(0)
    return match.start(), value if any(c.isdigit() for c in value) else ""


def _digest(match: re.Match[str]) -> _Span:
    return match.start(), match.group(0) if _starts_word(match) else ""


def _host(match: re.Match[str]) -> _Span:
    """``db.internal:5432``, ``localhost:8080``: a host with a dot, or localhost."""
    text = match.string
    start = match.start()
    while start > 0 and text[start - 1] in _HOST_CHARS:
        start -= 1
    host = text[start : match.start()].lstrip(".-")
    start = match.start() - len(host)
    named = host[:1].isalpha() and ("." in host or host == "localhost")
    return start, host + match.group(0) if named else ""


def _starts_word(match: re.Match[str]) -> bool:
    return match.start() == 0 or match.string[match.start() - 1] not in _NAME_CHARS


def _ticket(match: re.Match[str]) -> _Span:
    value = match.group(0)
    return match.start(), "" if value.split("-", 1)[0] in _NOT_TICKETS else value


def _declared(match: re.Match[str]) -> _Span:
    """``def name(``, ``class Name:``: the name, when it reads as code."""
    name = match.group(1)
    code = _starts_word(match) and (match.group(2) or CODE_LIKE.search(name))
    return match.start(1), name if code else ""


def _called(match: re.Match[str]) -> _Span:
    """``name()`` found from its parentheses: the name is read backwards from them, so
    the pattern is a plain search for "()" rather than a try at every word."""
    text = match.string
    start = match.start()
    while start > 0 and text[start - 1] in _NAME_CHARS:
        start -= 1
    # A name starts with a letter or an underscore ("2x()" is no call of "2x").
    while start < match.start() and text[start] not in _NAME_START:
        start += 1
    name = text[start : match.start()]
    return start, f"{name}()" if name and not name.endswith(".") else ""


def _backticked(match: re.Match[str]) -> _Span:
    value = match.group(1)
    code = CODE_LIKE.search(value) and not PATH.fullmatch(value)
    return match.start(1), value if code else ""


def _quoted(match: re.Match[str]) -> _Span:
    group = next(i for i, g in enumerate(match.groups(), 1) if g is not None)
    raw = match.group(group)
    value = raw.strip()
    # A quoted sentence is speech, not a literal: literals are short and have no full stop.
    literal = len(value.split()) <= 8 and not value.endswith(".")
    start = match.start(group) + len(raw) - len(raw.lstrip())
    return start, value if literal and any(c.isalnum() for c in value) else ""


def _gate(pattern: str) -> Callable[[str], bool]:
    """Passes text holding ``pattern`` (a short one that starts with a literal)."""
    search = re.compile(pattern, re.ASCII).search
    return lambda text: search(text) is not None


def _has(*needles: str) -> Callable[[str], bool]:
    """Passes text holding one of ``needles`` (a substring test is faster than a search)."""

    def has(text: str) -> bool:
        return any(needle in text for needle in needles)

    return has


_DIGITS = _gate(r"\d")
# A lower-case letter or digit then an upper-case one: camelCase and PascalCase words.
_HUMP = _gate(r"[a-z0-9][A-Z]")

_Gate = Callable[[str], bool]
_Pattern = tuple[str, re.Pattern[str], Callable[[re.Match[str]], _Span], _Gate]
# Most specific first: a span is taken by the first pattern that matches it. Each
# pattern runs only on text that passes its gate - one of its substrings, or a short
# pattern - which costs much less than the pattern itself.
_PATTERNS: tuple[_Pattern, ...] = (
    ("placeholder", PLACEHOLDER, _whole, _has("<")),
    ("url", _URL, _url, _has("://")),
    ("id", _UUID, _whole, _has("-")),
    ("id", _DASHED_ID, _dashed, _has("-")),
    ("path", PATH, _whole, _gate(r"\.(?:" + EXTENSIONS + r")(?![A-Za-z0-9_])")),
    ("path", _DIRECTORY, _whole, _has("/", "\\")),
    ("ticket", _TICKET, _ticket, _gate(r"-\d")),
    ("ticket", _ISSUE, _whole, _gate(r"#\d")),
    ("host", _IP, _whole, _gate(r"\.\d{1,3}\.\d")),
    ("host", _PORT, _host, _gate(r":\d\d")),
    ("version", _PINNED, _whole, _gate(r"(?:==|>=|<=|~=|@)\d")),
    ("version", _SEMVER, _whole, _gate(r"\.\d")),
    ("version", _NAMED_VERSION, _group, _gate(r"\.\d")),
    ("email", _EMAIL, _whole, _has("@")),
    ("hash", _DIGEST, _digest, _has("sha1:", "sha256:", "sha512:", "md5:")),
    ("hash", _HASH, _hash, _DIGITS),
    ("quantity", _MONEY, _whole, _has("$", "€", "£", "¥")),
    ("quantity", _QUANTITY, _whole, _DIGITS),
    ("name", _DECLARED, _declared, _has("def ", "fn ", "func", "class ", "interface ", "type ")),
    ("name", _CALLED, _called, _has("()")),
    ("name", BACKTICKED, _backticked, _has("`")),
    ("name", _DOTTED, _whole, _gate(r"\.[A-Za-z_]")),
    ("name", _SNAKE_WORD, _whole, _has("_")),
    ("name", _CAMEL_WORD, _whole, _HUMP),
    ("type", _TYPE_WORD, _whole, _HUMP),
    ("quoted", _QUOTED, _quoted, _has('"', "'", "`", "“", "「", "『")),
)
KINDS = tuple(dict.fromkeys(p[0] for p in _PATTERNS if p[0] != "placeholder"))


def find_identifiers(text: str, kinds: frozenset[str] | None = None) -> list[Found]:
    """The identifiers in ``text``, in order of appearance, each span found once.

    ``kinds`` limits what is returned (every kind still claims its spans, so a
    URL's path is never returned as a path). Placeholders written by the
    anonymize policy claim their spans and are never returned.
    """
    taken = bytearray(len(text))
    found: list[Found] = []
    # Patterns may share a gate: each is tested once.
    passed: dict[_Gate, bool] = {}
    for kind, pattern, value_of, gate in _patterns_for(kinds):
        if gate not in passed:
            passed[gate] = gate(text)
        if not passed[gate]:
            continue
        for match in pattern.finditer(text):
            start, value = value_of(match)
            if not value:
                continue
            end = start + len(value)
            if taken.find(1, start, end) >= 0:
                continue
            taken[start:end] = b"\x01" * (end - start)
            if kind != "placeholder" and (kinds is None or kind in kinds):
                found.append(Found(kind, value, start))
    found.sort(key=lambda f: f.start)
    return found


@functools.cache
def _patterns_for(kinds: frozenset[str] | None) -> tuple[_Pattern, ...]:
    """The patterns to run for ``kinds``: up to the last one of them, since a pattern
    after it cannot take a span from it."""
    wanted = [i for i, p in enumerate(_PATTERNS) if kinds is None or p[0] in kinds]
    return _PATTERNS[: max(wanted, default=-1) + 1]
