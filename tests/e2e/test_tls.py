"""TLS, mutual TLS and where a server without authentication may listen.

The certificates are made here, with a throwaway CA, by the cryptography
package.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import structlog.testing
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.app.authentication import new_token, token_entry_toml
from services.app.tenancy import Role
from services.cli import cli
from services.config import Config
from services.grpc.security import InsecureAddress
from services.grpc.server import LIVENESS, SERVICE_NAME, RunningServer, start
from tests.e2e.test_server_process import (
    _free_port,
    _run_to_exit,
    _server_env,
    _wait_until_serving,
)
from tests.support.channels import Security, open_channel

Stub = pb_grpc.SessionStoreStub


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # signed by another CA
    stranger_key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer or (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    path.with_suffix(".pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    path.with_suffix(".key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca_key, other_ca_key = _key(), _key()
    ca = _certificate("test CA", ca_key, None, ca=True)
    other_ca = _certificate("another CA", other_ca_key, None, ca=True)
    _write(root / "ca", ca, ca_key)
    made = {
        "server": (True, (ca.subject, ca_key)),
        "client": (False, (ca.subject, ca_key)),
        "stranger": (False, (other_ca.subject, other_ca_key)),
    }
    for name, (server, issuer) in made.items():
        key = _key()
        _write(root / name, _certificate(name, key, issuer, server=server), key)
    return Pki(
        root / "ca.pem",
        root / "server.pem",
        root / "server.key",
        root / "client.pem",
        root / "client.key",
        root / "stranger.pem",
        root / "stranger.key",
    )


def _serve(tmp_path: Path, pki: Pki, **settings: object) -> RunningServer:
    return start(
        Config(  # type: ignore[call-arg]
            address="127.0.0.1:0",
            database_url=f"sqlite:///{tmp_path}/s.db",
            tls_cert_file=pki.server_cert,
            tls_key_file=pki.server_key,
            **settings,
        )
    )


def _create(channel: grpc.Channel, session_id: str) -> pb.Session:
    return Stub(channel).CreateSession(pb.CreateSessionRequest(session_id=session_id), timeout=10)


def _unreachable(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        _create(channel, "never")
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE


def test_tls_serves_clients_that_trust_its_ca_and_not_plain_ones(tmp_path: Path, pki: Pki) -> None:
    server = _serve(tmp_path, pki)
    address = f"127.0.0.1:{server.port}"
    try:
        with open_channel(address, Security(ca_file=pki.ca)) as channel:
            assert _create(channel, "over-tls").id == "over-tls"
        with grpc.insecure_channel(address) as channel:
            _unreachable(channel)
    finally:
        server.stop(0)


def test_probes_reach_health_in_plain_text_and_nothing_else(tmp_path: Path, pki: Pki) -> None:
    """Kubernetes' grpc probes cannot speak TLS: SESSIONSTORE_HEALTH_ADDRESS serves
    them the health service, in plain text, and no other."""
    server = _serve(tmp_path, pki, health_address="127.0.0.1:0")
    probe_address = f"127.0.0.1:{server.health_port}"
    try:
        with grpc.insecure_channel(probe_address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for name in ("", SERVICE_NAME, LIVENESS):
                answer = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as refused:
                _create(channel, "not-here")
            assert refused.value.code() is grpc.StatusCode.UNIMPLEMENTED
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            _unreachable(channel)
    finally:
        server.stop(0)
    with grpc.insecure_channel(probe_address) as channel:
        with pytest.raises(grpc.RpcError) as gone:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        assert gone.value.code() is grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_refuses_clients_without_a_certificate_of_its_ca(
    tmp_path: Path, pki: Pki
) -> None:
    server = _serve(tmp_path, pki, tls_client_ca_file=pki.ca)
    address = f"127.0.0.1:{server.port}"
    try:
        with open_channel(address, Security("", pki.ca, pki.client_cert, pki.client_key)) as ok:
            assert _create(ok, "mtls").id == "mtls"
        with open_channel(address, Security(ca_file=pki.ca)) as anonymous:
            _unreachable(anonymous)
        stranger = Security("", pki.ca, pki.stranger_cert, pki.stranger_key)
        with open_channel(address, stranger) as channel:
            _unreachable(channel)
    finally:
        server.stop(0)


def test_the_cli_sends_its_token_over_tls(tmp_path: Path, pki: Pki) -> None:
    token = new_token()
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(token_entry_toml("cli", "acme", Role.TENANT, token))
    with structlog.testing.capture_logs():
        server = _serve(tmp_path, pki, tokens_file=tokens)
        address = f"127.0.0.1:{server.port}"
        try:
            runner = CliRunner()
            base = ["--address", address, "--ca-file", str(pki.ca)]
            created = runner.invoke(
                cli, [*base, "create", "--id", "cli-1"], env={"SESSIONSTORE_TOKEN": token}
            )
            assert created.exit_code == 0, created.output
            assert "created cli-1" in created.output
            listed = runner.invoke(cli, [*base, "--token", token, "--json", "list"])
            assert listed.exit_code == 0 and "cli-1" in listed.output
            anonymous = runner.invoke(cli, [*base, "show", "cli-1"], env={"SESSIONSTORE_TOKEN": ""})
            assert anonymous.exit_code == 1
            assert "UNAUTHENTICATED" in anonymous.output
        finally:
            server.stop(0)


def test_without_tokens_a_server_refuses_a_non_loopback_address(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/s.db"
    with pytest.raises(InsecureAddress, match="SESSIONSTORE_TOKENS_FILE"):
        start(Config(address="0.0.0.0:0", database_url=database))  # type: ignore[call-arg]
    # With the explicit override, it starts.
    server = start(
        Config(address="0.0.0.0:0", database_url=database, allow_unauthenticated_remote=True)  # type: ignore[call-arg]
    )
    server.stop(0)


def test_tokens_are_refused_in_clear_text_off_loopback(tmp_path: Path, pki: Pki) -> None:
    """Tokens on a non-loopback address need TLS, or the operator's explicit override."""
    database = f"sqlite:///{tmp_path}/s.db"
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(token_entry_toml("ops", "ops", Role.ADMIN, new_token()))
    with pytest.raises(InsecureAddress, match="SESSIONSTORE_ALLOW_TOKENS_WITHOUT_TLS"):
        start(Config(address="0.0.0.0:0", database_url=database, tokens_file=tokens))  # type: ignore[call-arg]
    allowed: list[dict[str, object]] = [
        {"address": "127.0.0.1:0"},
        {"address": "0.0.0.0:0", "allow_tokens_without_tls": True},
        {"address": "0.0.0.0:0", "tls_cert_file": pki.server_cert, "tls_key_file": pki.server_key},
    ]
    for settings in allowed:
        server = start(Config(database_url=database, tokens_file=tokens, **settings))  # type: ignore[arg-type]
        server.stop(0)


def test_the_server_process_says_why_it_will_not_serve_and_which_mode_it_is_in(
    tmp_path: Path,
) -> None:
    env = _server_env(tmp_path, SESSIONSTORE_ADDRESS="0.0.0.0:0", SESSIONSTORE_LOG_FORMAT="json")
    env.pop("SESSIONSTORE_TOKENS_FILE", None)
    env.pop("SESSIONSTORE_ALLOW_UNAUTHENTICATED_REMOTE", None)
    done = _run_to_exit(env)
    assert done.returncode == 1
    assert "serves loopback addresses only" in done.stderr
    assert "Traceback" not in done.stderr

    address = f"127.0.0.1:{_free_port()}"
    env["SESSIONSTORE_ADDRESS"] = address
    server = subprocess.Popen(
        [sys.executable, "-m", "services.grpc.server"], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_until_serving(address)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
    assert server.stderr is not None
    lines = [json.loads(line) for line in server.stderr.read().splitlines() if line.startswith("{")]
    (serving,) = [line for line in lines if line["event"] == "serving"]
    assert serving["auth"] == "none: every caller is admin, so serving on loopback only"
    assert serving["tls"] == "off"
