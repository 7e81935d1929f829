"""The tenant API's token bucket (domain/rate_limit.py), on a clock the test moves: the
burst, the refill, Retry-After in whole seconds, tenants apart, memory bounded."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronwire.domain.rate_limit import TenantRateLimit


def test_a_burst_of_twice_the_rate_then_retry_after_whole_seconds() -> None:
    limit = TenantRateLimit(50)
    assert [limit.take("a", 100.0) for _ in range(100)] == [0] * 100
    assert limit.take("a", 100.0) == 1  # one token comes back in 20 ms: a whole second
    assert limit.take("a", 100.025) == 0  # ... and it has
    assert limit.take("a", 100.025) == 1


def test_another_tenant_has_its_own_bucket() -> None:
    limit = TenantRateLimit(1)
    assert (limit.take("a", 0.0), limit.take("a", 0.0), limit.take("a", 0.0)) == (0, 0, 1)
    assert limit.take("b", 0.0) == 0


def test_a_slow_rate_says_how_many_seconds_and_still_admits_one_request() -> None:
    limit = TenantRateLimit(0.1)  # burst would be 0.2: at least one token is kept
    assert limit.take("a", 0.0) == 0
    assert limit.take("a", 0.0) == 10
    assert limit.take("a", 9.9) == 1  # 0.99 of a token: under a second more
    assert limit.take("a", 10.0) == 0


def test_idle_buckets_are_dropped_so_memory_follows_the_active_tenants() -> None:
    limit = TenantRateLimit(50)
    for tenant in range(10_000):  # a tenant count attack, one request each
        limit.take(tenant, 0.0)
    assert len(limit) == 10_000
    limit.take("later", 2.0)  # burst / rate = 2 s: every one of them is full again
    assert len(limit) == 1


def test_the_number_of_buckets_has_a_ceiling_even_when_none_is_idle() -> None:
    limit = TenantRateLimit(50, max_tracked=100)
    for tenant in range(1_000):
        limit.take(tenant, 0.0)
    assert len(limit) <= 100


@pytest.mark.parametrize("rate", [0.0, -1.0, math.nan, math.inf])
def test_a_rate_that_limits_nothing_or_everything_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match="rate_per_second"):
        TenantRateLimit(rate)


@given(rate=st.floats(min_value=1e-3, max_value=1e9),
       gaps=st.lists(st.floats(min_value=0, max_value=10), max_size=60))
def test_admitted_requests_never_exceed_the_burst_plus_the_refill(
        rate: float, gaps: list[float]) -> None:
    limit = TenantRateLimit(rate)
    now, admitted = 0.0, 0
    for gap in gaps:
        now += gap
        wait = limit.take("a", now)
        assert wait == 0 or (isinstance(wait, int) and wait >= 1)
        admitted += wait == 0
    assert admitted <= limit.burst + rate * now + 1e-6
