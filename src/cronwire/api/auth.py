"""Bearer-token authentication and scopes: every tenant route depends on a
:class:`Caller` from here, declared beside the route with the scope it needs::

    Writer = Annotated[Caller, Security(authenticated, scopes=["write"])]

The scope then appears in the OpenAPI document (``security: [{"HTTPBearer": ["write"]}]``),
and tests/integration/test_api_scopes.py calls every operation there with every scope.

Tokens are looked up by their SHA-256 and compared in constant time by the token store;
this module extracts the header, answers 401 for no token, an unknown or revoked one and
an expired one (saying so), 429 past the tenant's API rate, and 403 naming the scope a
request needs beyond the token's. Another tenant's object still answers 404 (the stores
see only the caller's tenant id). The tenant id a Caller carries is the only tenant id a
handler ever passes to a store; its :class:`Change` is what the audit log records.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, SecurityScopes

from cronwire.api.errors import ApiError, request_id_of
from cronwire.domain.access import Actor, Change, Grant, Scope, covers, strongest
from cronwire.domain.delivery import rfc3339_utc
from cronwire.domain.rate_limit import LIMIT, TenantRateLimit
from cronwire.ports import TokenVerifier

MAX_TOKEN_CHARS = 512
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="cronwire"'}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the tenant, the token's scope, and the origin of any change made."""

    tenant_id: uuid.UUID
    scope: Scope
    change: Change


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, headers=_CHALLENGE)


def _bearer() -> HTTPBearer:
    return HTTPBearer(auto_error=False, bearerFormat="cwt_<random>",
                      description="A token from `cronwire tenant create|token` or "
                      "`POST /v1/tokens`; its scope (read, write, admin) is what each "
                      "operation's security requirement names.")


async def _grant_for(
    tokens: TokenVerifier, credentials: HTTPAuthorizationCredentials | None
) -> Grant:
    if credentials is None or not credentials.credentials:
        raise unauthorized("authorization: missing bearer token")
    token = credentials.credentials
    found = None
    if len(token) <= MAX_TOKEN_CHARS:
        found = await tokens.grant_for_token(token)
    if found is None:
        raise unauthorized("authorization: unknown or revoked token")
    if found.expired:
        when = rfc3339_utc(found.expires_at) if found.expires_at else "its expiry"
        raise unauthorized(f"authorization: token expired at {when}")
    return found


def _admit(rate_limit: TenantRateLimit, tenant: uuid.UUID) -> None:
    wait = rate_limit.take(tenant, time.monotonic())
    if wait:
        raise ApiError(429, rate_limit.refusal(wait), limit=LIMIT,
                       headers={"Retry-After": str(wait)})


def _check_scope(grant: Grant, needed: Scope) -> None:
    if not covers(grant.scope, needed):
        raise ApiError(403, f"scope: this request needs a token of scope {needed} "
                       f"(this one is {grant.scope})", field="scope")


def _client_address(request: Request) -> str | None:
    return request.client.host[:64] if request.client else None


def caller_dependency(
    tokens: TokenVerifier, rate_limit: TenantRateLimit | None = None,
) -> Callable[..., Awaitable[Caller]]:
    """A FastAPI dependency yielding the :class:`Caller`, or answering 401, 429 with
    ``Retry-After`` past the tenant's API rate (``rate_limit``; None: no limit), or 403.
    Use it through ``Security(dependency, scopes=[...])``: the scope named there is the
    one the route needs."""
    bearer = _bearer()

    async def authenticated(
        request: Request, security_scopes: SecurityScopes,
        credentials: HTTPAuthorizationCredentials | None = Depends(bearer),  # noqa: B008
    ) -> Caller:
        grant = await _grant_for(tokens, credentials)
        if rate_limit is not None:
            _admit(rate_limit, grant.tenant_id)
        _check_scope(grant, strongest(security_scopes.scopes))
        change = Change(Actor(token_id=grant.token_id, token_name=grant.name),
                        request_id_of(request), _client_address(request))
        return Caller(grant.tenant_id, grant.scope, change)

    return authenticated


def request_authenticator(
    tokens: TokenVerifier,
) -> Callable[[Request, Sequence[str]], Awaitable[object]]:
    """The same checks on a bare request with the route's scopes: raises the 401 or 403
    (or the storage error) of :func:`caller_dependency`. The tenant routes run it before
    answering a request they could not parse, so a caller without a valid token, or
    without the scope, learns nothing about the body."""
    bearer = _bearer()

    async def authenticate(request: Request, scopes: Sequence[str]) -> object:
        grant = await _grant_for(tokens, await bearer(request))
        _check_scope(grant, strongest(list(scopes)))
        return grant

    return authenticate
