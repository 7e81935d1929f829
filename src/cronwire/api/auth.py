"""Bearer-token authentication: every tenant route depends on ``tenant_id`` from here.

Tokens are looked up by their SHA-256 and compared in constant time by the token store;
this module only extracts the header and turns "no tenant" into 401. The tenant id it
returns is the only tenant id a handler ever passes to a store. The tenant's API rate
limit (domain/rate_limit.py) is taken here too, once the tenant is known, so every `/v1`
route is limited and nothing else is (/healthz, /readyz, /metrics and /console never ask
for a tenant).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cronwire.api.errors import ApiError
from cronwire.domain.rate_limit import LIMIT, TenantRateLimit
from cronwire.ports import TokenVerifier

MAX_TOKEN_CHARS = 512
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="cronwire"'}


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, headers=_CHALLENGE)


def _bearer() -> HTTPBearer:
    return HTTPBearer(auto_error=False, bearerFormat="cwt_<random>",
                      description="A token from `cronwire tenant create|token`.")


async def _tenant_for(
    tokens: TokenVerifier, credentials: HTTPAuthorizationCredentials | None
) -> uuid.UUID:
    if credentials is None or not credentials.credentials:
        raise unauthorized("authorization: missing bearer token")
    token = credentials.credentials
    found = None
    if len(token) <= MAX_TOKEN_CHARS:
        found = await tokens.tenant_for_token(token)
    if found is None:
        raise unauthorized("authorization: unknown or revoked token")
    return found


def _admit(rate_limit: TenantRateLimit, tenant: uuid.UUID) -> None:
    wait = rate_limit.take(tenant, time.monotonic())
    if wait:
        raise ApiError(429, rate_limit.refusal(wait), limit=LIMIT,
                       headers={"Retry-After": str(wait)})


def tenant_dependency(
    tokens: TokenVerifier, rate_limit: TenantRateLimit | None = None,
) -> Callable[..., Awaitable[uuid.UUID]]:
    """A FastAPI dependency yielding the caller's tenant id, or answering 401, or 429 with
    ``Retry-After`` past the tenant's API rate (``rate_limit``; None: no limit)."""
    bearer = _bearer()

    async def tenant_id(
        credentials: HTTPAuthorizationCredentials | None = Depends(bearer),  # noqa: B008
    ) -> uuid.UUID:
        tenant = await _tenant_for(tokens, credentials)
        if rate_limit is not None:
            _admit(rate_limit, tenant)
        return tenant

    return tenant_id


def request_authenticator(tokens: TokenVerifier) -> Callable[[Request], Awaitable[object]]:
    """The same check on a bare request: raises the 401 (or the storage error) of
    :func:`tenant_dependency`. The tenant routes run it before answering a request they
    could not parse, so a caller without a valid token learns nothing about the body."""
    bearer = _bearer()

    async def authenticate(request: Request) -> object:
        return await _tenant_for(tokens, await bearer(request))

    return authenticate
