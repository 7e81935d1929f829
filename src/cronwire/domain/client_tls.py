"""A target's client certificate (mTLS, ADR 0061): what a tenant sends, what reads show,
and the rules it must meet. Pure: parsing PEM with ``cryptography`` reads no file and no
network.

A tenant sends ``target.tls = {"client_certificate": PEM, "client_key": PEM}``. The key is
a credential: sealed at rest like the signing secret, never shown again. Reads show the
certificate's subject and its ``not_after`` (kept beside the PEM when the target is stored,
so no read parses a certificate).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cronwire.domain.errors import RuleViolation

# cryptography's X.509 and key parsing is imported by the three functions that parse PEM,
# when a tenant first sends a certificate: every replica imports this module (the
# executor's targets carry a ClientTls), and the parsers cost each start about 50 ms.
if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

CERTIFICATE_FIELD = "target.tls.client_certificate"
KEY_FIELD = "target.tls.client_key"
# A certificate chain and a key are a few KiB; the bound keeps hostile input small.
MAX_PEM_CHARS = 32 * 1024
MAX_CHAIN = 10
MAX_RSA_BITS = 4096


@dataclass(frozen=True, slots=True)
class ClientTls:
    """A client certificate chain (leaf first) and its private key, both PEM. Where it is
    stored ``key`` is the sealed text; everywhere else, in clear."""

    certificate: str
    key: str = field(repr=False)
    subject: str = ""
    not_after: datetime | None = None


def client_tls_from_pem(certificate: str, key: str) -> ClientTls:
    """The ClientTls of a PEM certificate (chain) and its key; RuleViolation naming the
    field for a PEM that does not parse, an encrypted key or a key that is not the
    certificate's. Expiry is :func:`check_not_expired`'s (it needs the clock)."""
    from cryptography.exceptions import UnsupportedAlgorithm

    leaf = _leaf(certificate)
    try:  # a certificate parses lazily: a damaged key or name fails only here
        public, subject, not_after = (_public(leaf.public_key()), leaf.subject.rfc4514_string(),
                                      leaf.not_valid_after_utc)
    except (ValueError, UnsupportedAlgorithm):
        raise RuleViolation(CERTIFICATE_FIELD, "holds a public key or subject that does "
                            "not parse") from None
    private_key = _private_key(key)
    try:
        matches = _public(private_key.public_key()) == public
    except (ValueError, UnsupportedAlgorithm):
        matches = False
    if not matches:
        raise RuleViolation(KEY_FIELD, "is not the private key of the client certificate")
    return ClientTls(certificate=certificate, key=key, subject=subject, not_after=not_after)


def check_not_expired(tls: ClientTls, now: datetime) -> None:
    if tls.not_after is not None and tls.not_after <= now:
        raise RuleViolation(CERTIFICATE_FIELD,
                            f"expired at {tls.not_after.isoformat()}; send a current one")


def _leaf(certificate: str) -> x509.Certificate:
    from cryptography import x509
    from cryptography.utils import CryptographyDeprecationWarning

    if len(certificate) > MAX_PEM_CHARS:
        raise RuleViolation(CERTIFICATE_FIELD, f"is longer than {MAX_PEM_CHARS} characters")
    try:
        with warnings.catch_warnings():
            # What cryptography only warns about today (a serial number that is not
            # positive, ...) is refused: the next release will, and a receiver may.
            warnings.simplefilter("error", CryptographyDeprecationWarning)
            chain = x509.load_pem_x509_certificates(certificate.encode())
    except (ValueError, TypeError, x509.InvalidVersion, CryptographyDeprecationWarning):
        raise RuleViolation(CERTIFICATE_FIELD, "is not a PEM certificate "
                            "(-----BEGIN CERTIFICATE-----) that follows RFC 5280") from None
    if len(chain) > MAX_CHAIN:
        raise RuleViolation(CERTIFICATE_FIELD, f"holds more than {MAX_CHAIN} certificates")
    return chain[0]


def _private_key(key: str) -> PrivateKeyTypes:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    if len(key) > MAX_PEM_CHARS:
        raise RuleViolation(KEY_FIELD, f"is longer than {MAX_PEM_CHARS} characters")
    try:
        # No RSA validation: proving the primes costs 0.5 s of CPU for a 4096-bit key and a
        # minute for a 16384-bit one, on the API's loop. The key must match the certificate
        # (checked next) and stay within MAX_RSA_BITS; a key that is wrong anyway only
        # fails its own handshakes.
        loaded = serialization.load_pem_private_key(key.encode(), password=None,
                                                    unsafe_skip_rsa_key_validation=True)
    except TypeError:
        raise RuleViolation(KEY_FIELD, "is encrypted; send the key without a "
                            "passphrase (it is sealed at rest)") from None
    except ValueError:
        raise RuleViolation(KEY_FIELD, "is not a PEM private key "
                            "(-----BEGIN PRIVATE KEY-----)") from None
    except UnsupportedAlgorithm:
        raise RuleViolation(KEY_FIELD, "is a private key of an algorithm TLS cannot "
                            "use here") from None
    size = getattr(loaded, "key_size", 0)  # RSA and DSA; EC keys are 256 to 571 bits
    if size > MAX_RSA_BITS:
        # Each handshake signs with it on the replica's event loop, shared by every tenant.
        raise RuleViolation(KEY_FIELD, f"is a {size}-bit key; at most "
                            f"{MAX_RSA_BITS} bits (or an EC or Ed25519 key)")
    return loaded


def _public(key: PublicKeyTypes) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def tls_to_document(tls: ClientTls) -> dict[str, str | None]:
    return {"client_certificate": tls.certificate, "client_key": tls.key,
            "client_certificate_subject": tls.subject,
            "client_certificate_not_after": (None if tls.not_after is None
                                             else _utc_text(tls.not_after))}


def tls_from_document(doc: object) -> ClientTls | None:
    """Lenient, like every stored document's reader: a malformed member gives None."""
    if not isinstance(doc, dict):
        return None
    certificate, key = doc.get("client_certificate"), doc.get("client_key")
    if not isinstance(certificate, str) or not isinstance(key, str):
        return None
    when = tls_expiry_from_text(doc.get("client_certificate_not_after"))
    return ClientTls(certificate=certificate, key=key,
                     subject=str(doc.get("client_certificate_subject") or ""), not_after=when)


def tls_expiry_from_text(text: object) -> datetime | None:
    """A stored ``client_certificate_not_after`` as an instant (None: absent or not one)."""
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _utc_text(when: datetime) -> str:
    # One fixed shape in UTC, so the text orders as the instants do: the gauge of the
    # earliest expiry takes min() of it through an index (migration 0025).
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
