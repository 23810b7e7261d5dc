"""Bounding a summary trims the user's own words no further than the bound needs, however
many of them there are: in batches, yet to the very line that checking the bound after
each one would stop at."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from domain.context.summary.bounding import _excess, _trim_protected, bounded
from domain.context.summary.layout import (
    ALL_SECTIONS,
    NAMED_BY_USER,
    USER_ERROR,
    USER_INSTRUCTION,
    entry_line,
    list_line,
    parse_summary,
    render,
)

Count = Callable[[str], int] | None


def _said(count: int) -> dict[str, list[str]]:
    """A summary of nothing but the user's words: ``count`` instructions, a third as many
    errors, and ``count`` identifiers they named."""
    sections: dict[str, list[str]] = {name: [] for name in ALL_SECTIONS}
    sections["Goal"] = ["First request: keep the ledger service up"]
    sections["Constraints"] = [
        entry_line(USER_INSTRUCTION, f"u{i}", f"Never restart node {i} in business hours.")
        for i in range(count)
    ]
    sections["Critical Context"] = [
        list_line(NAMED_BY_USER, [f"INC-{4000 + i}" for i in range(count)]),
        *(
            entry_line(USER_ERROR, f"u{i}", f"ECONNREFUSED from db-{i}.internal:5432")
            for i in range(0, count, 3)
        ),
    ]
    return sections


def _one_at_a_time(
    sections: dict[str, list[str]], max_chars: int, count: Count, max_tokens: int | None
) -> str:
    """The summary bounded by trimming one of the user's words at a time, rendering and
    measuring it again after each."""
    text = render(sections)
    while _excess(text, max_chars, count, max_tokens) > 0 and _trim_protected(sections, 0):
        text = render(sections)
    return text


def _tokens(text: str) -> int:
    return len(text) // 3


@pytest.mark.parametrize(
    ("max_chars", "count", "max_tokens"),
    [
        (2_000, None, None),
        (7_000, None, None),
        (15_000, None, None),
        # The tokens bind, not the characters.
        (20_000, _tokens, 2_500),
    ],
)
def test_the_users_words_go_no_further_than_the_bound_needs(
    max_chars: int, count: Count, max_tokens: int | None
) -> None:
    sections = _said(600)
    expected = _one_at_a_time(copy.deepcopy(sections), max_chars, count, max_tokens)

    text = bounded(sections, max_chars, count, max_tokens)

    assert text == expected
    kept = parse_summary(text)
    # Some of each kind went, oldest first, and some stayed.
    assert 0 < len(kept["Constraints"]) < 600
    assert kept["Constraints"][-1].endswith("Never restart node 599 in business hours.")
    named = kept["Critical Context"][0]
    assert named.startswith(f"{NAMED_BY_USER}: `INC-")
    assert named.endswith("`INC-4599`")
    assert "`INC-4000`" not in named
