"""A target's client certificate (mTLS, ADR 0061): what parses, what is refused and with
which field named, and the stored document's round trip. Certificates are made here."""

from __future__ import annotations

import contextlib
import random
import string
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from cronwire.domain.client_tls import (
    CERTIFICATE_FIELD,
    KEY_FIELD,
    check_not_expired,
    client_tls_from_pem,
)
from cronwire.domain.documents import target_from_document, target_to_document
from cronwire.domain.errors import RuleViolation
from cronwire.domain.model import Target
from tests.support.certificates import Authority, cert_pem, key_pem, new_key

CA = Authority()


def test_a_certificate_and_its_key_give_the_subject_and_expiry() -> None:
    not_after = datetime.now(UTC).replace(microsecond=0) + timedelta(days=20)
    cert, key = CA.issue("billing-client", not_after=not_after)
    tls = client_tls_from_pem(cert_pem(cert) + cert_pem(CA.cert), key_pem(key))
    assert tls.subject == "CN=billing-client"
    assert tls.not_after == not_after
    assert key_pem(key) not in repr(tls)


@pytest.mark.parametrize(("certificate", "key", "field"), [
    ("not a certificate", None, CERTIFICATE_FIELD),
    ("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", None, CERTIFICATE_FIELD),
    (None, "not a key", KEY_FIELD),
    (None, key_pem(new_key()), KEY_FIELD),  # a key, but not the certificate's
    (None, key_pem(new_key(), password=b"pass"), KEY_FIELD),  # encrypted
    ("x" * 40_000, None, CERTIFICATE_FIELD),
])
def test_a_bad_pem_or_a_key_of_another_certificate_names_its_field(
        certificate: str | None, key: str | None, field: str) -> None:
    good_cert, good_key = CA.issue("c")
    with pytest.raises(RuleViolation) as refused:
        client_tls_from_pem(certificate or cert_pem(good_cert), key or key_pem(good_key))
    assert refused.value.field == field


def test_an_expired_certificate_is_refused_naming_the_certificate() -> None:
    now = datetime.now(UTC)
    cert, key = CA.issue("old", not_after=now - timedelta(hours=1))
    tls = client_tls_from_pem(cert_pem(cert), key_pem(key))
    with pytest.raises(RuleViolation) as refused:
        check_not_expired(tls, now)
    assert refused.value.field == CERTIFICATE_FIELD and "expired" in refused.value.reason
    check_not_expired(tls, now - timedelta(days=1))


def test_the_stored_document_keeps_everything_and_a_target_without_tls_keeps_its_shape() -> None:
    cert, key = CA.issue("c")
    tls = client_tls_from_pem(cert_pem(cert), key_pem(key))
    target = Target("https://example.com/h", tls=tls)
    assert target_from_document(target_to_document(target)) == target
    assert "tls" not in target_to_document(Target("https://example.com/h"))
    text = target_to_document(target)["tls"]["client_certificate_not_after"]
    assert text.endswith("Z") and len(text) == 20  # one shape: text order is time order
    assert target_from_document({"url": "u", "tls": {"client_certificate": 1}}).tls is None


def test_a_damaged_certificate_or_key_is_a_422_never_another_error() -> None:
    """Hostile input: a good PEM pair with characters replaced at random (a damaged
    public key, version, serial or name parses lazily in cryptography) is refused naming
    a field, or accepted; nothing else escapes (a 500), and no warning either."""
    pem = CA.client_tls("fuzzed")
    rnd = random.Random(47)
    for _ in range(1500):
        damaged = dict(pem)
        for name in rnd.sample(sorted(damaged), rnd.randint(1, 2)):
            chars = list(damaged[name])
            for _ in range(rnd.randint(1, 8)):
                chars[rnd.randrange(len(chars))] = rnd.choice(string.printable + "é")
            damaged[name] = "".join(chars)
        with contextlib.suppress(RuleViolation):
            client_tls_from_pem(damaged["client_certificate"], damaged["client_key"])


def test_an_rsa_key_above_4096_bits_is_refused_and_one_within_is_taken() -> None:
    # Each handshake signs with the key on the replica's shared event loop (and proving a
    # big key's primes would cost the API's loop seconds), so the size is bounded.
    for bits, refused in ((2048, False), (4160, True)):
        key = rsa.generate_private_key(65537, bits)
        cert, _ = CA.issue("rsa", key=key)  # type: ignore[arg-type]
        if refused:
            with pytest.raises(RuleViolation) as error:
                client_tls_from_pem(cert_pem(cert), key_pem(key))  # type: ignore[arg-type]
            assert error.value.field == KEY_FIELD and "4096" in error.value.reason
        else:
            assert client_tls_from_pem(cert_pem(cert), key_pem(key)).subject == "CN=rsa"  # type: ignore[arg-type]
