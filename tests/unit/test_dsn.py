"""Connection URLs with several hosts (dsn.py): parsed the way libpq and
asyncpg read them, split host by host for the connector, and refused in one line when
malformed."""

from __future__ import annotations

import pytest

from cronwire.dsn import DsnError, Host, parse_dsn

PAIR = "postgresql://app:s%40cret@10.0.0.1:5432,[fd00::2]:6432,db3/cw?target_session_attrs=read-write&sslmode=require"


def test_a_multi_host_url_keeps_every_host_in_order() -> None:
    dsn = parse_dsn(PAIR)
    assert dsn.hosts == (Host("10.0.0.1", 5432), Host("[fd00::2]", 6432), Host("db3", None))
    assert dsn.target_session_attrs == "read-write" and dsn.password == "s@cret"
    assert str(dsn) == PAIR


def test_each_host_alone_keeps_the_rest_but_not_the_connectors_parameters() -> None:
    dsn = parse_dsn(PAIR + "&connect_timeout=3")
    assert dsn.connect_timeout == 3.0
    assert dsn.for_host(1) == "postgresql://app:s%40cret@[fd00::2]:6432/cw?sslmode=require"
    assert dsn.for_host(2) == "postgresql://app:s%40cret@db3/cw?sslmode=require"


def test_another_database_and_a_redacted_form_keep_every_host() -> None:
    dsn = parse_dsn(PAIR)
    assert dsn.with_database("chaos_1").startswith(
        "postgresql://app:s%40cret@10.0.0.1:5432,[fd00::2]:6432,db3/chaos_1?")
    assert "s%40cret" not in dsn.redacted() and dsn.redacted().startswith("postgresql://app:***@")


def test_hosts_in_a_host_parameter_are_left_to_the_driver() -> None:
    dsn = parse_dsn("postgres://?host=/run/postgresql&target_session_attrs=any")
    assert dsn.hosts == () and dsn.host_count == 1
    assert dsn.for_host(0) == "postgres://?host=%2Frun%2Fpostgresql"


@pytest.mark.parametrize(("url", "reason"), [
    ("mysql://h/db", "must be a postgresql:// URL"),
    ("postgresql://h1:5432,h2:notaport/db", "malformed port"),
    ("postgresql://h1:5432,h2:0/db", "malformed port"),
    ("postgresql://h1:5432,,h2/db", "malformed host"),
    ("postgresql://h1:5432,h 2/db", "malformed host"),
    ("postgresql://[::1/db", "IPv6"),
    ("postgresql://[zz::1]:5432/db", "not an IPv6 address"),
    ("postgresql:///db", "names no host"),
    ("postgresql://h1,h2/db?target_session_attrs=master", "target_session_attrs must be one of"),
    ("postgresql://h1,h2/db?connect_timeout=-1", "connect_timeout"),
])
def test_a_malformed_url_is_refused_in_one_line(url: str, reason: str) -> None:
    with pytest.raises(DsnError, match=reason) as refused:
        parse_dsn(url)
    assert "\n" not in str(refused.value)
