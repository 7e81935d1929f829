"""Certificates made in the test with ``cryptography``: a private authority, a server
certificate for loopback, client certificates (current, expired, with another key), and a
receiver on loopback that requires a client certificate (``ssl.CERT_REQUIRED``)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Key = ec.EllipticCurvePrivateKey


def new_key() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: Key, password: bytes | None = None) -> str:
    encryption: serialization.KeySerializationEncryption = (
        serialization.NoEncryption() if password is None
        else serialization.BestAvailableEncryption(password))
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption).decode()


def cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass
class Authority:
    key: Key = field(default_factory=new_key)
    name: str = "cronwire test CA"

    def __post_init__(self) -> None:
        now = datetime.now(UTC)
        self.cert = (x509.CertificateBuilder().subject_name(_name(self.name))
                     .issuer_name(_name(self.name)).public_key(self.key.public_key())
                     .serial_number(x509.random_serial_number())
                     .not_valid_before(now - timedelta(days=1))
                     .not_valid_after(now + timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .sign(self.key, hashes.SHA256()))

    def issue(self, common_name: str, *, server: bool = False, key: Key | None = None,
              not_after: datetime | None = None) -> tuple[x509.Certificate, Key]:
        key = key or new_key()
        now = datetime.now(UTC)
        not_after = not_after or now + timedelta(days=10)
        builder = (x509.CertificateBuilder().subject_name(_name(common_name))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(min(now, not_after) - timedelta(days=2))
                   .not_valid_after(not_after))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False).add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        else:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
        return builder.sign(self.key, hashes.SHA256()), key

    def client_tls(self, common_name: str, **kwargs: object) -> dict[str, str]:
        """The ``target.tls`` body of a new client certificate."""
        cert, key = self.issue(common_name, **kwargs)  # type: ignore[arg-type]
        return {"client_certificate": cert_pem(cert), "client_key": key_pem(key)}

    def write(self, directory: Path) -> Path:
        path = directory / "ca.pem"
        path.write_text(cert_pem(self.cert))
        return path


@dataclass
class MutualTlsReceiver:
    """An HTTPS receiver on loopback that completes only handshakes presenting a client
    certificate of the authority; answers 200 and records each client's subject, and the
    handshakes it refused. Blocking sockets in a thread, as a plain server does it: a
    refused handshake sends its TLS alert and closes after the client's bytes are read
    (a lingering close, like nginx's), so the client can read why."""

    url: str
    clients: list[str]
    refused: list[str]


def _answer(conn: ssl.SSLSocket, clients: list[str]) -> None:
    peer = conn.getpeercert() or {}
    subject = ",".join(f"{k}={v}" for rdn in peer.get("subject", ()) for k, v in rdn)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.lower().split(b"\r\n")
                   if line.startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk
    clients.append(subject)
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")


def _linger_close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(1.0)
        while sock.recv(65536):
            pass
    sock.close()


def _serve(listener: socket.socket, context: ssl.SSLContext, clients: list[str],
           refused: list[str], stop: threading.Event) -> None:
    listener.settimeout(0.1)
    while not stop.is_set():
        try:
            raw, _ = listener.accept()
        except TimeoutError:
            continue
        raw.settimeout(5.0)
        conn = context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        try:
            conn.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            refused.append(repr(exc))
            _linger_close(conn)
            continue
        try:
            _answer(conn, clients)
        except OSError as exc:
            refused.append(repr(exc))
        finally:
            conn.close()


@contextlib.asynccontextmanager
async def mutual_tls_receiver(authority: Authority, directory: Path
                              ) -> AsyncIterator[MutualTlsReceiver]:
    cert, key = authority.issue("127.0.0.1", server=True)
    chain, key_file = directory / "server.pem", directory / "server-key.pem"
    chain.write_text(cert_pem(cert))
    key_file.write_text(key_pem(key))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain, key_file)
    context.load_verify_locations(cadata=cert_pem(authority.cert))
    context.verify_mode = ssl.CERT_REQUIRED
    clients: list[str] = []
    refused: list[str] = []
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(listener, context, clients, refused, stop),
                              name="mtls-receiver", daemon=True)
    thread.start()
    try:
        yield MutualTlsReceiver(f"https://127.0.0.1:{port}/hook", clients, refused)
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 5)
        listener.close()
