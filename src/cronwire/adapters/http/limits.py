"""What one delivery attempt may cost us, whatever the receiver sends (ADR 0026). Both
deliverers keep to these; the lean one checks each as the bytes arrive."""

from __future__ import annotations

from cronwire.domain.delivery import EXCERPT_BYTES

MAX_HEAD_BYTES = 64 * 1024  # received before the final head is complete, 1xx answers included
MAX_LINE_BYTES = 8 * 1024  # one status reason, one header field (name + value)
MAX_HEADERS = 100  # fields of one head
MAX_INTERIM = 8  # 1xx answers before the final one
DRAIN_BYTES = 64 * 1024  # read past the excerpt so a keep-alive connection can be reused
MAX_BODY_BYTES = EXCERPT_BYTES + DRAIN_BYTES  # past it the connection is closed
MAX_TRAILER_BYTES = 8 * 1024  # trailer fields after a chunked body
MAX_RESPONSE_BYTES = 256 * 1024  # every byte of one exchange, framing included
