"""TLS contexts for both deliverers: the plain one, and one per client certificate (mTLS,
ADR 0061) that presents the target's certificate to a receiver that asks for one.

Python's ``ssl`` loads a certificate and key only from a file. The key is a tenant secret,
sealed at rest, so it never goes to disk here: it is written to an anonymous memory file
(``memfd_create``) that ``load_cert_chain`` reads through ``/proc/self/fd`` and that is
closed at once. Contexts are kept per (certificate, key), bounded, so a schedule firing
every second builds its context once, and the same object names it in the lean
deliverer's pool key: a connection made with one certificate is never reused for another
request (nor for one without a certificate).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections import OrderedDict
from collections.abc import Callable

from cronwire.domain.client_tls import ClientTls

# Contexts kept; beyond it the least recently used goes (its pooled connections stay
# usable until they idle out; the next request builds the context again).
CAPACITY = 512


class TlsContexts:
    def __init__(self, trusted_cas: str | None = None, capacity: int = CAPACITY,
                 base: Callable[[], ssl.SSLContext] = ssl.create_default_context) -> None:
        """``base`` makes each context (the deliverer's usual one); ``trusted_cas``: a PEM
        bundle trusted beside its authorities (tests, or receivers behind a private one)."""
        self._base = base
        self._trusted_cas = trusted_cas
        self._capacity = capacity
        self._plain: ssl.SSLContext | None = None
        self._clients: OrderedDict[tuple[str, str], ssl.SSLContext] = OrderedDict()

    def plain(self) -> ssl.SSLContext:
        if self._plain is None:
            self._plain = self._new()
        return self._plain

    def for_client(self, tls: ClientTls | None) -> ssl.SSLContext:
        """The context that presents ``tls`` (the plain one for None). Raises ssl.SSLError
        or ValueError if the key does not load (the attempt fails with that evidence)."""
        if tls is None:
            return self.plain()
        key = (tls.certificate, tls.key)
        context = self._clients.get(key)
        if context is not None:
            self._clients.move_to_end(key)
            return context
        context = self._new_client()
        _load_client_certificate(context, tls)
        self._clients[key] = context
        if len(self._clients) > self._capacity:
            self._clients.popitem(last=False)
        return context

    def _new(self) -> ssl.SSLContext:
        context = self._base()
        if self._trusted_cas is not None:
            context.load_verify_locations(cafile=self._trusted_cas)
        return context

    def _new_client(self) -> ssl.SSLContext:
        """A context to add a client certificate to. Loading the system's CA bundle takes
        about 30 ms, on the event loop every tenant shares, and a tenant decides how many
        certificates there are: so where the system has a hashed CA directory, OpenSSL
        looks an authority up there when a handshake needs it, and making the context
        costs under a millisecond. The same authorities either way on a system whose
        bundle and directory come from one place (Debian's update-ca-certificates)."""
        capath = ssl.get_default_verify_paths().capath
        if not capath or not os.path.isdir(capath):
            return self._new()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies peer and host name
        context.load_verify_locations(capath=capath)
        if self._trusted_cas is not None:
            context.load_verify_locations(cafile=self._trusted_cas)
        return context


def _load_client_certificate(context: ssl.SSLContext, tls: ClientTls) -> None:
    pem = (tls.certificate.rstrip("\n") + "\n" + tls.key).encode()
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("cronwire-client-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            context.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    # Without memfd (not Linux): a private file, removed as soon as it is read.
    with tempfile.NamedTemporaryFile(prefix="cronwire-tls-", suffix=".pem") as file:
        file.write(pem)
        file.flush()
        context.load_cert_chain(file.name)
