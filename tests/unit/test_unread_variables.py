"""A SESSIONSTORE_* variable that no setting reads is named, with the setting it was
probably meant for: the settings ignore names they do not know, so a misspelt one
would leave its setting at the default without a word."""

from __future__ import annotations

from services.config import unread_variables


def test_a_misspelt_setting_is_named_with_the_one_it_is_closest_to() -> None:
    assert unread_variables(
        {"SESSIONSTORE_DATABSE_URL": "sqlite:///x.db", "SESSIONSTORE_CACHE_MAX_MBS": "64"}
    ) == {
        "SESSIONSTORE_CACHE_MAX_MBS": "SESSIONSTORE_CACHE_MAX_MB",
        "SESSIONSTORE_DATABSE_URL": "SESSIONSTORE_DATABASE_URL",
    }


def test_a_name_like_no_setting_is_named_alone() -> None:
    assert unread_variables({"SESSIONSTORE_PORT": "50051"}) == {"SESSIONSTORE_PORT": None}


def test_settings_and_what_other_programs_read_are_not_named() -> None:
    environ = {
        "SESSIONSTORE_ADDRESS": "127.0.0.1:1",  # a setting
        "sessionstore_log_level": "debug",  # a setting, in the case the settings ignore
        "SESSIONSTORE_TOKEN": "t",  # the client's and the CLI's
        "SESSIONSTORE_SERVICE_CONFIG_FILE": "f",
        "SESSIONSTORE_TOKENS": "tokens.toml",  # the Compose file's
        "SESSIONSTORE_TEST_POSTGRES_URL": "postgresql://",  # the test suite's
        "PATH": "/bin",  # no prefix
    }
    assert unread_variables(environ) == {}
