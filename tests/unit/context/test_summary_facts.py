# ruff: noqa: RUF001 - the Chinese text here is punctuated as Chinese is written
"""What the offline summariser recognises in what a user writes: identifiers of every kind,
explicit instructions in English and Chinese, and error messages."""

from __future__ import annotations

import hashlib

import pytest

from domain.context.summary import parse_summary, summarize_offline
from domain.context.summary.identifiers import find_identifiers
from domain.context.summary.patterns import (
    CONSTRAINT,
    DECISION,
    INSTRUCTION,
    Phrases,
    instructions_in,
    stated_errors,
)
from tests.unit.support import assistant, call, tool, user

IDENTIFIERS = [
    ("ticket", "INC-48213"),
    ("ticket", "JIRA-12"),
    ("ticket", "GH-123"),
    ("ticket", "#4711"),
    ("ticket", "acme/store#12"),
    ("ticket", "CVE-2024-3094"),
    ("hash", "a1b2c3d"),
    ("hash", "3f9a2c1d4e5f60718293a4b5c6d7e8f901234567"),
    ("hash", "sha256:" + "ab12" * 16),
    ("id", "123e4567-e89b-12d3-a456-426614174000"),
    ("id", "3f9a2c1d-77aa"),
    ("url", "https://ci.example.com/runs/77?attempt=2"),
    ("url", "https://en.wikipedia.org/wiki/Foo_(bar)"),
    ("email", "oncall.ledger@example.org"),
    ("path", "src/auth/login.py"),
    ("path", "/etc/nginx/sites-enabled"),
    ("path", "/home/用户/文档.md"),
    ("path", r"C:\Users\dev\project\main.rs"),
    ("host", "10.0.0.5:5432"),
    ("host", "db.internal:5432"),
    ("version", "v1.2.3-rc.1"),
    ("version", "requests==2.31.0"),
    ("version", "1.2.3"),
    ("quantity", "420 ms"),
    ("quantity", "p99 420 ms"),
    ("quantity", "3.5 GB"),
    ("quantity", "99.9%"),
    ("quantity", "12 req/s"),
    ("quantity", "30 s"),
    ("quantity", "$1,200"),
    ("quantity", "300毫秒"),
    ("name", "check_password()"),
    ("name", "MAX_RETRIES"),
    ("name", "getUser"),
    ("name", "os.path.join"),
    ("type", "SessionStore"),
    ("quoted", "Project Falcon"),
]


@pytest.mark.parametrize(("kind", "value"), IDENTIFIERS)
@pytest.mark.parametrize(
    "sentence",
    ["Please look at {} when you can.", "请查看{}的问题。", "Was it ({})?", "{}"],
)
def test_each_kind_of_identifier_is_found_whole_in_english_and_chinese_text(
    kind: str, value: str, sentence: str
) -> None:
    value_in_text = f'"{value}"' if kind == "quoted" else value
    found = find_identifiers(sentence.format(value_in_text))
    assert (kind, value) in [(f.kind, f.value) for f in found]


def test_a_span_belongs_to_one_identifier() -> None:
    found = find_identifiers("See https://x.io/a/b.py and ./tools/run.sh at v2.0.1, not UTF-8.")
    assert [(f.kind, f.value) for f in found] == [
        ("url", "https://x.io/a/b.py"),
        ("path", "./tools/run.sh"),
        ("version", "v2.0.1"),
    ]


def test_prose_is_not_taken_for_identifiers() -> None:
    text = (
        "Please make the tests pass again, then tell me what you changed and why. "
        "It's 3 in the afternoon; don't worry about the e.g. and i.e. in the docs."
    )
    assert find_identifiers(text) == []


@pytest.mark.parametrize(
    "sentence",
    [
        "Remember that the staging database is stg-7.",
        "Always run the linter before you commit.",
        "Never push directly to main.",
        "Don't touch the migrations.",
        "Don’t touch the fixtures.",
        "Do not delete the fixtures.",
        "You must keep the public API stable.",
        "Make sure every answer cites the ticket.",
        "Keep in mind that the client pays per request.",
        "Note that the cache lives for 5 minutes.",
        "From now on, answer in English.",
        "记住：发布窗口是周五。",
        "记得给客户发邮件。",
        "始终用中文回答。",
        "总是先写测试再写代码。",
        "永远不要在生产环境运行脚本。",
        "不要修改配置文件。",
        "别删除日志目录。",
        "必须使用 UTF-8 编码。",
        "务必保留旧的接口。",
        "一定要在合并前跑完测试。",
        "以后所有的提交都要签名。",
    ],
)
def test_an_explicit_instruction_is_found_word_for_word(sentence: str) -> None:
    text = f"Here is some context first. {sentence}\nAnd then the actual request."
    assert sentence in instructions_in(text)


def test_words_that_merely_contain_an_instruction_word_are_not_instructions() -> None:
    text = "特别是这个区别很重要。别人已经看过了。The neverending story is long."
    assert instructions_in(text) == []


@pytest.mark.parametrize("phrases", [INSTRUCTION, CONSTRAINT, DECISION])
def test_phrases_are_found_in_any_case_wherever_their_pattern_finds_them(phrases: Phrases) -> None:
    # The search skips the pattern for ASCII text whose lower case holds no phrase: right
    # only while every phrase is written in lower case and the pattern finds no other.
    for phrase in phrases.phrases:
        assert phrase == phrase.lower()
        for text in (
            phrase,
            f"Please {phrase.upper()} now.",
            f"Then {phrase.title()}.",
            f"x{phrase}y",
            f"Bitte {phrase.replace('s', chr(0x17F)).replace('i', chr(0x130))} jetzt.",
        ):
            assert bool(phrases.search(text)) == bool(phrases.pattern.search(text)), text


def test_an_instruction_that_introduces_a_list_keeps_the_list() -> None:
    text = "Keep in mind:\n- the API is frozen until Friday"
    assert instructions_in(text) == ["Keep in mind: the API is frozen until Friday"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "It fails with TypeError: Cannot read properties of undefined (reading 'x')",
            "TypeError: Cannot read properties of undefined (reading 'x')",
        ),
        (
            'The job says "psql: error: FATAL: role "svc" does not exist" again',
            'psql: error: FATAL: role "svc" does not exist',
        ),
        ("pytest: ModuleNotFoundError: No module named 'foo'", "No module named 'foo'"),
        ("build: error TS2345: Argument of type 'x'. Can you fix it?", "error TS2345:"),
        ("it keeps saying 「连接超时：节点7没有响应」", "连接超时：节点7没有响应"),
        ('and then "connection refused" in the log', "connection refused"),
        ("报错ValueError: bad value，怎么办", "ValueError: bad value"),
        (
            "The nightly job failed with: ERROR 1213 (40001): Deadlock found on table orders",
            "ERROR 1213 (40001): Deadlock found on table orders",
        ),
    ],
)
def test_an_error_the_user_states_is_kept_as_written(text: str, error: str) -> None:
    assert any(error in stated for stated in stated_errors(text))


def test_the_users_words_are_kept_apart_from_what_tools_print() -> None:
    entries = [
        user(
            "The outage is INC-48213 (420 ms at p99). Remember to cite it in the notes.\n"
            "```\nTraceback (most recent call last):\nValueError: bad row 7\n"
            "deploy 5f3e2a1b-0c9d-4e8f-a7b6-c5d4e3f2a1b0\n```",
            id="u1",
        ),
        assistant("Looking.", id="a1", calls=[call("c1", "fetch", '{"url": "https://x.io"}')]),
        tool("c1", "GET https://api.example.com/v2 took 120 ms, build 9f8e7d6c", id="t1"),
    ]
    critical = parse_summary(summarize_offline(entries))["Critical Context"]
    assert critical[0] == "Named by the user: `INC-48213`, `420 ms`"
    assert "Error reported by the user (entry u1): ValueError: bad row 7" in critical
    # What the user pasted and what the tool printed are incidental.
    identifiers = next(i for i in critical if i.startswith("Identifiers:"))
    for value in ("5f3e2a1b-0c9d-4e8f-a7b6-c5d4e3f2a1b0", "https://x.io", "9f8e7d6c"):
        assert f"`{value}`" in identifiers


def test_anonymize_never_rewrites_a_placeholder_of_an_earlier_roll() -> None:
    first = summarize_offline(
        [user("Read src/path/check.py and run `path` on it", id="u1")],
        identifier_policy="anonymize",
    )
    placeholder = f"<path-{hashlib.sha256(b'src/path/check.py').hexdigest()[:8]}>"
    assert placeholder in first
    rolled = summarize_offline(
        [user("Now the same for `path` again", id="u2")],
        previous_summary=first,
        identifier_policy="anonymize",
    )
    assert placeholder in rolled
    assert "src/path/check.py" not in rolled


def test_anonymize_keeps_versions_numbers_and_type_names() -> None:
    summary = summarize_offline(
        [
            user(
                "Deploy v2.4.1 to host db.internal:5432; it must answer in 420 ms. "
                "SessionStore raises ValueError for oncall@example.org",
                id="u1",
            )
        ],
        identifier_policy="anonymize",
    )
    for kept in ("v2.4.1", "420 ms", "SessionStore", "ValueError"):
        assert kept in summary
    for gone in ("db.internal", "oncall@example.org"):
        assert gone not in summary
    assert "<host-" in summary and "<email-" in summary


def test_a_log_pasted_without_fences_reports_its_first_and_last_error() -> None:
    log = "\n".join(f"2026-11-25 10:00:{i:02d} ERROR: worker {i} lost its lease" for i in range(40))
    errors = stated_errors(f"Look at this:\n{log}\nWhat happened?")
    assert errors == ["ERROR: worker 0 lost its lease", "ERROR: worker 39 lost its lease"]
