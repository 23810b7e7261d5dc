"""The tokens file and bearer-token authentication, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.app.authentication import (
    PermissionDenied,
    TokenBook,
    TokensFileError,
    Unauthenticated,
    authorize,
    new_token,
    token_digest,
    token_entry_toml,
)
from services.app.tenancy import Permission, Principal, Role
from services.config import Config


def _book(tmp_path: Path, text: str) -> TokenBook:
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    return TokenBook.load(path)


def test_a_new_token_entry_authenticates_its_token_and_holds_only_its_hash(
    tmp_path: Path,
) -> None:
    ci, audit = new_token(), new_token()
    assert ci != audit and len(ci) >= 40
    text = token_entry_toml("ci", "acme", Role.TENANT, ci) + token_entry_toml(
        "audit", "acme", Role.AUDITOR, audit
    )
    assert ci not in text and token_digest(ci) in text
    book = _book(tmp_path, text)
    assert book.authenticate(f"Bearer {ci}") == Principal("ci", "acme", Role.TENANT)
    assert book.authenticate(f"bearer  {audit} ") == Principal("audit", "acme", Role.AUDITOR)


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (None, "needs a bearer token"),
        ("", "needs a bearer token"),
        ("Basic dXNlcjpwYXNz", "not a bearer token"),
        ("Bearer ", "not a bearer token"),
        ("Bearer not-a-known-token", "not one this server knows"),
    ],
)
def test_missing_or_unknown_tokens_are_refused_saying_what_to_send(
    tmp_path: Path, header: str | None, says: str
) -> None:
    book = _book(tmp_path, token_entry_toml("ci", "acme", Role.TENANT, new_token()))
    with pytest.raises(Unauthenticated) as refused:
        book.authenticate(header)
    assert says in str(refused.value)
    assert "authorization: Bearer <token>" in str(refused.value)


def test_a_role_without_the_permission_is_denied_naming_what_it_needs() -> None:
    auditor = Principal("audit", "acme", Role.AUDITOR)
    authorize(auditor, Permission.READ, "GetSession")
    with pytest.raises(PermissionDenied) as denied:
        authorize(auditor, Permission.WRITE, "AppendEntries")
    assert "AppendEntries" in str(denied.value) and "write" in str(denied.value)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "lists no [[tokens]]"),
        ("tokens = [", "not valid TOML"),
        ('[[tokens]]\nname = "a"\ntenant = "t"\nrole = "tenant"\n', "sha256 is required"),
        (
            '[[tokens]]\nname = "a"\ntenant = "t"\nrole = "root"\nsha256 = "' + "0" * 64 + '"\n',
            "role 'root' is not one of tenant, auditor, admin",
        ),
        (
            '[[tokens]]\nname = "a"\ntenant = "t"\nrole = "tenant"\nsha256 = "my-token"\n',
            "never the token itself",
        ),
        (
            '[[tokens]]\nname = "a b"\ntenant = "t"\nrole = "tenant"\nsha256 = "'
            + "0" * 64
            + '"\n',
            "name 'a b' must be",
        ),
        (
            '[[tokens]]\nname = "a"\ntenant = "t"\nrole = "tenant"\nsha256 = "'
            + "0" * 64
            + '"\ntoken = "x"\n',
            "unknown keys ['token']",
        ),
        (
            token_entry_toml("a", "t", Role.TENANT, "x")
            + token_entry_toml("a", "u", Role.ADMIN, "y"),
            "listed twice",
        ),
    ],
)
def test_a_bad_tokens_file_is_refused_saying_what_is_wrong(
    tmp_path: Path, text: str, says: str
) -> None:
    with pytest.raises(TokensFileError) as refused:
        _book(tmp_path, text)
    assert says in str(refused.value)


def test_a_missing_tokens_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TokensFileError, match="cannot read the tokens file"):
        TokenBook.load(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1:50051", True),
        ("127.0.0.2:1", True),
        ("[::1]:50051", True),
        ("localhost:50051", True),
        ("0.0.0.0:50051", False),
        ("[::]:50051", False),
        ("10.1.2.3:50051", False),
        ("example.com:50051", False),
    ],
)
def test_which_addresses_are_loopback(address: str, loopback: bool) -> None:
    assert Config(address=address).listens_on_loopback is loopback


def test_tls_files_come_together(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="together"):
        Config(tls_cert_file=tmp_path / "cert.pem")
    with pytest.raises(ValueError, match="needs TLS"):
        Config(tls_client_ca_file=tmp_path / "ca.pem")
