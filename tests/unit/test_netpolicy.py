"""Address classification and target-URL validation (pure; nothing connects)."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address

import pytest

from cronwire.domain.errors import DomainError, InvalidTarget
from cronwire.domain.netpolicy import forbidden_reason, parse_host_ip, validate_target_url


@pytest.mark.parametrize(
    ("address", "range_word"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("100.127.255.254", "carrier-grade NAT"),
        ("169.254.169.254", "link-local"),
        ("169.254.0.1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "this-network"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "broadcast"),
        ("192.0.0.8", "reserved"),
        ("192.0.2.10", "documentation"),
        ("198.51.100.7", "documentation"),
        ("203.0.113.9", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("::", "unspecified"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fc00::1", "unique-local"),
        ("fd12:3456:789a::1", "unique-local"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("3fff::1", "documentation"),
        ("64:ff9b:1::1", "local-use NAT64"),
        ("100::1", "discard"),
        ("fec0::1", "site-local"),
        ("4000::1", "outside global unicast"),
    ],
)
def test_forbidden_ranges_are_named(address: str, range_word: str) -> None:
    reason = forbidden_reason(ip_address(address))
    assert reason is not None
    assert range_word in reason


@pytest.mark.parametrize(
    ("address", "form", "range_word"),
    [
        ("::ffff:127.0.0.1", "IPv4-mapped", "loopback"),
        ("::ffff:169.254.169.254", "IPv4-mapped", "link-local"),
        ("::ffff:10.0.0.1", "IPv4-mapped", "private"),
        ("::127.0.0.1", "IPv4-compatible", "loopback"),
        ("::10.0.0.1", "IPv4-compatible", "private"),
        ("2002:7f00:1::", "6to4", "loopback"),
        ("2002:a9fe:a9fe::1", "6to4", "link-local"),
        ("2002:c0a8:0101::", "6to4", "private"),
        ("64:ff9b::127.0.0.1", "NAT64", "loopback"),
        ("64:ff9b::a00:1", "NAT64", "private"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo", "loopback"),  # client 127.0.0.1
    ],
)
def test_embedded_ipv4_forms_are_judged_by_the_embedded_address(
    address: str, form: str, range_word: str
) -> None:
    reason = forbidden_reason(ip_address(address))
    assert reason is not None
    assert form in reason
    assert range_word in reason


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.216.34",
        "100.63.255.255",  # just below CGNAT
        "100.128.0.0",  # just above CGNAT
        "172.32.0.1",  # just above 172.16/12
        "2606:4700:4700::1111",
        "2a00:1450:4001:82b::200e",
        "::ffff:8.8.8.8",
        "2002:808:808::1",  # 6to4 of 8.8.8.8
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    ],
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert forbidden_reason(ip_address(address)) is None


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),  # one 32-bit decimal
        ("0177.0.0.1", "127.0.0.1"),  # octal
        ("0x7f.0.0.1", "127.0.0.1"),  # hex
        ("0X7F.0X0.0X0.0X1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),  # short: last part fills three bytes
        ("127.0.1", "127.0.0.1"),  # last part fills two bytes
        ("0x7f.1", "127.0.0.1"),  # mixed
        ("0251.0xfe.43518", "169.254.169.254"),  # mixed octal, hex, 16-bit decimal
        ("127.0.0.1.", "127.0.0.1"),  # fully-qualified trailing dot
        ("0", "0.0.0.0"),
        ("[::1]", "::1"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("[fe80::1%25eth0]", "fe80::1"),
    ],
)
def test_parse_host_ip_understands_inet_aton_spellings(host: str, expected: str) -> None:
    parsed = parse_host_ip(host)
    assert parsed is not None
    assert parsed == ip_address(expected)


@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        "rebind.test",
        "256.0.0.1",
        "1.2.3.4.5",
        "0x100000000",
        "1.0x1000000",
        "08.0.0.1",
        "1..2",
        "",
        "[::g]",
        "127.0.0.1x",
        "4294967296",
        "\uff11\uff12\uff17.\uff10.\uff10.\uff11",  # fullwidth digits are not inet_aton's
        "\u0661\u0662\u0667.0.0.1",  # nor are Arabic-Indic ones
    ],
)
def test_parse_host_ip_returns_none_for_names_and_invalid_numbers(host: str) -> None:
    assert parse_host_ip(host) is None


def test_spellings_of_loopback_are_forbidden() -> None:
    for host in ("2130706433", "0177.0.0.1", "0x7f.0.0.1", "127.1", "[::ffff:127.0.0.1]"):
        parsed = parse_host_ip(host)
        assert parsed is not None
        assert forbidden_reason(parsed) is not None, host


def test_parse_host_ip_types() -> None:
    assert isinstance(parse_host_ip("127.1"), IPv4Address)
    assert isinstance(parse_host_ip("[::1]"), IPv6Address)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hook",
        "http://example.com:8080/a/b?c=d",
        "https://[2606:4700:4700::1111]/x",
        "https://xn--mnchen-3ya.example/hook",
        "http://my_service.internal-name.example:8443/",
        "HTTPS://Example.COM/",
    ],
)
def test_valid_urls_are_returned(url: str) -> None:
    assert validate_target_url(url) == url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/x", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("gopher://example.com/", "scheme"),
        ("example.com/hook", "scheme"),
        ("http:///path", "host"),
        ("https://", "host"),
        ("https://user:pw@example.com/", "userinfo"),
        ("https://user@example.com/", "userinfo"),
        ("https://example.com/" + "a" * 2048, "longer than 2048"),
        ("https://example.com/hook#frag", "fragment"),
        ("https://example.com/hook#", "fragment"),
        ("https://example.com:99999/", "port"),
        ("https://example.com:0/", "port"),
        ("https://exa mple.com/", "whitespace"),
        ("https://example.com/\r\nx", "control"),
        ("https://[::g]/", "IPv6"),
        ("http://[fe80::1%25eth0]/", "IPv6"),
        ("http://127\u30020\u30020\u30021/", "ASCII"),  # ideographic full stops
        ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "ASCII"),  # fullwidth digits
        ("http://\u24dbocalhost/", "ASCII"),  # circled l: IDNA maps it to "localhost"
        ("http://%31%32%37.0.0.1/", "ASCII"),
        ("http://m\u00fcnchen.example/", "punycode"),
    ],
)
def test_invalid_urls_raise_invalid_target(url: str, message: str) -> None:
    with pytest.raises(InvalidTarget) as raised:
        validate_target_url(url)
    text = str(raised.value)
    assert text.startswith("target.url: ")
    assert message.lower() in text.lower()
    assert isinstance(raised.value, DomainError)
