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

import re
from collections.abc import Callable
from dataclasses import dataclass

from domain.context.summary.patterns import BACKTICKED, CODE_LIKE, FUNCTION, PATH

# Not part of an ASCII word on the left / right. Every pattern here is ASCII-only
# (re.ASCII): \w and \d never take a Chinese character as part of an identifier.
_L = r"(?<![A-Za-z0-9_])"
_R = r"(?![A-Za-z0-9_])"

# Kinds replaced by a placeholder under the ``anonymize`` policy. Versions,
# quantities, type names (``ValueError``, ``PostgreSQL``) and quoted literals say
# nothing about who or where: they stay.
ANONYMIZED = frozenset({"url", "email", "ticket", "id", "hash", "path", "host", "name"})

PLACEHOLDER = re.compile(r"<(?:" + "|".join(sorted(ANONYMIZED)) + r")-[0-9a-f]{8}>", re.ASCII)
_URL = re.compile(
    r"(?<![\w/])(?:https?|ftp|wss?|ssh|git|s3|gs|file)://[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+",
    re.ASCII,
)
_EMAIL = re.compile(_L + r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+" + _R, re.ASCII)
_UUID = re.compile(
    _L + r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}" + _R,
    re.ASCII,
)
# Hex ids in dashed groups (3f9a2c1d-77aa); a UUID is one of them.
_DASHED_ID = re.compile(
    r"(?<![\w<-])(?=[0-9a-f-]*\d)[0-9a-f]{8}(?:-[0-9a-f]{4,})+(?![\w-])", re.ASCII
)
# Git short and long hashes, digests: hex with at least one digit and one letter.
_HASH = re.compile(
    _L + r"(?:(?:sha1|sha256|sha512|md5):)?(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,128}" + _R,
    re.ASCII,
)
# INC-48213, JIRA-12, GH-123, CVE-2024-3094; #4711; owner/repo#12.
_TICKET = re.compile(_L + r"[A-Z][A-Z0-9]{1,11}(?:-\d+)+" + _R, re.ASCII)
_ISSUE = re.compile(r"(?<![\w/.-])[\w.-]+/[\w.-]+#\d+" + _R + r"|(?<![\w&#])#\d+" + _R, re.ASCII)
# Letters and digits joined by a dash that are not ids.
_NOT_TICKETS = frozenset({"UTF", "SHA", "ISO", "MD", "AES", "RSA", "TLS", "SSL", "HTTP", "IPV"})
_IP = re.compile(_L + r"(?<!\.)\d{1,3}(?:\.\d{1,3}){3}(?::\d{2,5})?(?!\.?\d)" + _R, re.ASCII)
_HOST = re.compile(_L + r"(?:localhost|[A-Za-z][\w-]*(?:\.[\w-]+)+):\d{2,5}" + _R, re.ASCII)
# A directory path: rooted (/, ~/, ./, C:\) with two segments or more, or ending in "/".
_DIRECTORY = re.compile(
    r"(?<![\w/\\.:-])(?:(?:~|\.{1,2})?/|[A-Za-z]:\\)(?:[A-Za-z0-9_.@+-]+[\\/])+[A-Za-z0-9_.@+-]*"
    r"|(?<![\w/\\.:-])[A-Za-z0-9_.@+-]+/(?:[A-Za-z0-9_.@+-]+/)+",
    re.ASCII,
)
# 1.2.3, v1.2.3-rc.1, v1.2; pinned (requests==2.31.0, node@20.1); named (Python 3.12).
_SEMVER = re.compile(
    r"(?<![A-Za-z0-9_.])v?\d+(?:\.\d+){2,}(?:[-+][0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?"
    + _R
    + r"|(?<![A-Za-z0-9_.])v\d+\.\d+"
    + _R,
    re.ASCII,
)
_PINNED = re.compile(
    _L + r"[A-Za-z][\w.-]*(?:==|>=|<=|~=|@)\d+(?:\.\d+)*(?:[-+][0-9A-Za-z.]+)?" + _R, re.ASCII
)
_NAMED_VERSION = re.compile(
    r"(?i:(?<![A-Za-z])(?:version|release|python|node|java|go|rust|postgres(?:ql)?)\s*)"
    r"(\d+(?:\.\d+)+)" + _R,
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
_NUMBER = r"(?<![A-Za-z0-9_.,])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_MONEY = re.compile(
    r"(?<![A-Za-z0-9_.,])[$€£¥]\d[\d,]*(?:\.\d+)?(?:\s?(?:[kKMB]|bn|million|billion))?" + _R,
    re.ASCII,
)
_QUANTITY = re.compile(
    _NUMBER + r"(?:%|\s?(?:" + _UNITS + r")" + _R + r"|\s?(?:" + _CJK_UNITS + r"))", re.ASCII
)
# Code-shaped words: snake_case, SCREAMING_CASE, _private, camelCase.
_CODE_WORD = re.compile(
    _L + r"(?:[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|_[A-Za-z0-9_]{2,}|[a-z]+[A-Z][A-Za-z0-9]*)"
    r"(?:\(\))?" + _R,
    re.ASCII,
)
# PascalCase with two humps or more: type and product names.
_TYPE_WORD = re.compile(_L + r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+" + _R, re.ASCII)
# Dotted names: module.function, obj.method, host.example.com (each part two letters or more).
_DOTTED = re.compile(
    _L + r"[A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]+)+(?:\(\))?" + _R, re.ASCII
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


def _url(match: re.Match[str]) -> str:
    url = match.group(0).rstrip(".,;:!?'")
    # A closing bracket belongs to the URL only when the URL opened one.
    while url[-1:] in ")]" and url.count(url[-1]) > url.count("(" if url[-1] == ")" else "["):
        url = url[:-1].rstrip(".,;:!?'")
    return url


def _ticket(match: re.Match[str]) -> str:
    value = match.group(0)
    return "" if value.split("-", 1)[0] in _NOT_TICKETS else value


def _group(match: re.Match[str]) -> str:
    return match.group(1)


def _function(match: re.Match[str]) -> str:
    if match.group(3):
        return f"{match.group(3)}()"
    return match.group(1) if match.group(2) or CODE_LIKE.search(match.group(1)) else ""


def _backticked(match: re.Match[str]) -> str:
    value = match.group(1)
    return value if CODE_LIKE.search(value) and not PATH.fullmatch(value) else ""


def _whole(match: re.Match[str]) -> str:
    return match.group(0)


def _quoted(match: re.Match[str]) -> str:
    value = next(g for g in match.groups() if g is not None).strip()
    # A quoted sentence is speech, not a literal: literals are short and have no full stop.
    literal = len(value.split()) <= 8 and not value.endswith(".")
    return value if literal and any(c.isalnum() for c in value) else ""


# Most specific first: a span is taken by the first pattern that matches it. Each
# pattern runs only on text holding its needle (when it has one): a cheap test first.
_Pattern = tuple[str, re.Pattern[str], Callable[[re.Match[str]], str], tuple[str, ...]]
_PATTERNS: tuple[_Pattern, ...] = (
    ("placeholder", PLACEHOLDER, _whole, ("<",)),
    ("url", _URL, _url, ("://",)),
    ("id", _UUID, _whole, ("-",)),
    ("id", _DASHED_ID, _whole, ("-",)),
    ("path", PATH, _whole, (".",)),
    ("path", _DIRECTORY, _whole, ("/", "\\")),
    ("ticket", _TICKET, _ticket, ("-",)),
    ("ticket", _ISSUE, _whole, ("#",)),
    ("host", _IP, _whole, (".",)),
    ("host", _HOST, _whole, (":",)),
    ("version", _PINNED, _whole, ("==", ">=", "<=", "~=", "@")),
    ("version", _SEMVER, _whole, (".",)),
    ("version", _NAMED_VERSION, _group, (".",)),
    ("email", _EMAIL, _whole, ("@",)),
    ("hash", _HASH, _whole, ()),
    ("quantity", _MONEY, _whole, ("$", "€", "£", "¥")),
    ("quantity", _QUANTITY, _whole, ()),
    ("name", FUNCTION, _function, ()),
    ("name", BACKTICKED, _backticked, ("`",)),
    ("name", _DOTTED, _whole, (".",)),
    ("name", _CODE_WORD, _whole, ()),
    ("type", _TYPE_WORD, _whole, ()),
    ("quoted", _QUOTED, _quoted, ('"', "'", "`", "“", "「", "『")),
)
KINDS = tuple(dict.fromkeys(p[0] for p in _PATTERNS if p[0] != "placeholder"))


def find_identifiers(text: str, kinds: frozenset[str] | None = None) -> list[Found]:
    """The identifiers in ``text``, in order of appearance, each span found once.

    ``kinds`` limits what is returned (every kind still claims its spans, so a
    URL's path is never returned as a path). Placeholders written by the
    anonymize policy claim their spans and are never returned.
    """
    wanted = [i for i, p in enumerate(_PATTERNS) if kinds is None or p[0] in kinds]
    taken = bytearray(len(text))
    found: list[Found] = []
    # Patterns after the last wanted one cannot take a span from it: they need not run.
    for kind, pattern, value_of, needles in _PATTERNS[: max(wanted, default=-1) + 1]:
        if needles and not any(needle in text for needle in needles):
            continue
        for match in pattern.finditer(text):
            value = value_of(match)
            if not value:
                continue
            start = match.start() + match.group(0).find(value)
            end = start + len(value)
            if taken.find(1, start, end) >= 0:
                continue
            taken[start:end] = b"\x01" * (end - start)
            if kind != "placeholder" and (kinds is None or kind in kinds):
                found.append(Found(kind, value, start))
    found.sort(key=lambda f: f.start)
    return found
