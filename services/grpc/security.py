"""Who may call the server, and over what: bearer tokens and TLS from the configuration.

Without tokens every caller is an admin, so such a server listens on loopback
only unless told otherwise.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import grpc

from services.app.authentication import TokenBook
from services.config import Config


class InsecureAddress(ValueError):
    """No authentication configured, or tokens without TLS, on an address others can reach."""


def security_mode(config: Config) -> dict[str, str]:
    """What the server checks of its callers, for the start-up log."""
    if config.tokens_file is not None:
        auth = f"bearer tokens from {config.tokens_file}"
        if config.tls_cert_file is None and not config.listens_on_loopback:
            auth += ", in clear text (SESSIONSTORE_ALLOW_TOKENS_WITHOUT_TLS)"
    elif config.listens_on_loopback:
        auth = "none: every caller is admin, so serving on loopback only"
    else:
        auth = "NONE on a non-loopback address (SESSIONSTORE_ALLOW_UNAUTHENTICATED_REMOTE)"
    if config.tls_client_ca_file is not None:
        tls = "mutual: clients need a certificate"
    else:
        tls = "on" if config.tls_cert_file is not None else "off"
    return {"auth": auth, "tls": tls}


def check_exposure(config: Config) -> None:
    """Refuses (InsecureAddress) a configuration that would serve without
    authentication, or send tokens in clear text, where others could connect."""
    remote = not config.listens_on_loopback
    if config.tokens_file is None and remote and not config.allow_unauthenticated_remote:
        raise InsecureAddress(
            f"no authentication is configured, so this server serves loopback addresses "
            f"only, not {config.address}: set SESSIONSTORE_TOKENS_FILE (see `sessionstore "
            "token new`), listen on 127.0.0.1, or set "
            "SESSIONSTORE_ALLOW_UNAUTHENTICATED_REMOTE=true behind a gateway that "
            "authenticates"
        )
    clear_text = config.tokens_file is not None and remote and config.tls_cert_file is None
    if clear_text and not config.allow_tokens_without_tls:
        raise InsecureAddress(
            f"bearer tokens would cross the network in clear text on {config.address}: "
            "set SESSIONSTORE_TLS_CERT_FILE and SESSIONSTORE_TLS_KEY_FILE, listen on "
            "127.0.0.1, or set SESSIONSTORE_ALLOW_TOKENS_WITHOUT_TLS=true behind a proxy "
            "that terminates TLS"
        )


def load_security(config: Config) -> tuple[TokenBook | None, grpc.ServerCredentials | None]:
    """The tokens and TLS credentials, refusing to serve without authentication
    where others could connect."""
    check_exposure(config)
    tokens = TokenBook.load(config.tokens_file) if config.tokens_file is not None else None
    credentials = None
    if config.tls_cert_file is not None and config.tls_key_file is not None:
        try:
            chain = config.tls_cert_file.read_bytes()
            key = config.tls_key_file.read_bytes()
            client_ca = (
                config.tls_client_ca_file.read_bytes()
                if config.tls_client_ca_file is not None
                else None
            )
        except OSError as error:
            raise OSError(f"cannot read a TLS file: {error.filename}: {error.strerror}") from None
        check_tls_files(config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file)
        credentials = grpc.ssl_server_credentials(
            [(key, chain)],
            root_certificates=client_ca,
            require_client_auth=client_ca is not None,
        )
    return tokens, credentials


def check_tls_files(cert_file: Path, key_file: Path, client_ca_file: Path | None) -> None:
    """Refuses files that are not a PEM certificate chain, its private key and CA
    certificates: gRPC would only fail to bind, which reads as a taken address."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as error:
        raise ValueError(
            f"SESSIONSTORE_TLS_CERT_FILE {cert_file} and SESSIONSTORE_TLS_KEY_FILE {key_file} "
            f"are not a PEM certificate chain and its private key ({error.reason or error})"
        ) from None
    if client_ca_file is None:
        return
    try:
        context.load_verify_locations(cafile=client_ca_file)
    except ssl.SSLError as error:
        raise ValueError(
            f"SESSIONSTORE_TLS_CLIENT_CA_FILE {client_ca_file} holds no PEM CA certificate "
            f"({error.reason or error})"
        ) from None
