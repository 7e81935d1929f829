"""Every CONTRACT.md variable is read; a bad value names its variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwire.config import Settings, load_settings
from cronwire.domain.errors import ConfigError


def test_defaults_match_the_contract() -> None:
    s = load_settings({})
    assert s.database_url is None and s.embedded_database
    assert s.home == Path("./.cronwire")
    assert (s.http_host, s.http_port) == ("127.0.0.1", 8080)
    assert s.roles == {"api", "planner", "executor"}
    assert s.claim_source == "postgres" and s.kafka_topic == "cronwire.runs"
    assert s.kafka_partitions == 12 and s.kafka_replication_factor is None  # 3 or fewer brokers
    assert (s.planner_tick_seconds, s.planner_lookahead_seconds, s.planner_batch) == (1, 5, 500)
    assert s.executor_batch == 500 and s.delivery_timeout_seconds == 10
    assert s.lease_seconds == 20
    assert s.dev_mode and s.allow_private_targets  # embedded database, loopback API: ADR 0037
    assert s.auto_migrate is True
    assert (s.shutdown_grace_seconds, s.retention_months) == (20, 3)
    assert (s.tenant_max_schedules, s.tenant_min_interval_seconds,
            s.tenant_max_body_bytes) == (100_000, 1, 65_536)
    assert (s.tenant_max_pending_runs, s.api_rate_per_second) == (100_000, 50)
    assert s.instance_id  # <hostname>-<pid>


def test_environment_overrides() -> None:
    s = load_settings({
        "SCHEDULER_DATABASE_URL": "postgresql://u:p@db:5432/cron",
        "SCHEDULER_ROLES": "planner, executor",
        "SCHEDULER_CLAIM_SOURCE": "KAFKA",
        "SCHEDULER_KAFKA_BOOTSTRAP_SERVERS": "k1:9092,k2:9092",
        "SCHEDULER_EXECUTOR_WORKERS": "64",
        "SCHEDULER_KAFKA_REPLICATION_FACTOR": "2",
        "SCHEDULER_ALLOW_PRIVATE_TARGETS": "true",
        "SCHEDULER_INSTANCE_ID": "pod-a",
    })
    assert s.database_url == "postgresql://u:p@db:5432/cron"
    assert s.roles == {"planner", "executor"}
    assert s.claim_source == "kafka" and s.kafka_replication_factor == 2
    assert s.executor_workers == 64 and s.allow_private_targets and s.instance_id == "pod-a"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SCHEDULER_CLAIM_SOURCE", "redis"),
        ("SCHEDULER_DATABASE_URL", "mysql://x@y/z"),
        ("SCHEDULER_DATABASE_URL", "postgresql://host:notaport/db"),
        ("SCHEDULER_DATABASE_URL", "not a url"),
        ("SCHEDULER_DELIVERY_TIMEOUT_SECONDS", "-1"),
        ("SCHEDULER_DELIVERY_TIMEOUT_SECONDS", "nan"),
        ("SCHEDULER_HTTP_PORT", "70000"),
        ("SCHEDULER_PLANNER_BATCH", "0"),
        ("SCHEDULER_KAFKA_REPLICATION_FACTOR", "0"),
        ("SCHEDULER_KAFKA_REPLICATION_FACTOR", "40000"),
        ("SCHEDULER_EXECUTOR_WORKERS", "many"),
        ("SCHEDULER_ROLES", "api,cook"),
        ("SCHEDULER_ROLES", "0\n0"),  # found by test_config_fuzz: a line break in the role
        ("SCHEDULER_ALLOW_PRIVATE_TARGETS", "maybe"),
        ("SCHEDULER_KAFKA_BOOTSTRAP_SERVERS", "localhost"),
        # Retention of one month drops last month, where 7-day catch-up runs are written.
        ("SCHEDULER_RETENTION_MONTHS", "1"),
        ("SCHEDULER_PLANNER_LOOKAHEAD_SECONDS", "86401"),
        ("SCHEDULER_TENANT_MAX_PENDING_RUNS", "0"),
        ("SCHEDULER_TENANT_MAX_PENDING_RUNS", "2147483648"),  # tenant's column is integer
        ("SCHEDULER_TENANT_MAX_PENDING_RUNS", "lots"),
        ("SCHEDULER_API_RATE_PER_SECOND", "0"),
        ("SCHEDULER_API_RATE_PER_SECOND", "-5"),
        ("SCHEDULER_API_RATE_PER_SECOND", "nan"),
        ("SCHEDULER_API_RATE_PER_SECOND", "inf"),
        ("SCHEDULER_API_RATE_PER_SECOND", "fast"),
    ],
)
def test_bad_value_names_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({variable: value})
    message = str(caught.value)
    assert message.startswith(variable + ":")
    assert "\n" not in message


def test_toml_file_sets_keys_and_environment_wins(tmp_path: Path) -> None:
    path = tmp_path / "cronwire.toml"
    path.write_text('planner_batch = 250\nSCHEDULER_EXECUTOR_BATCH = 100\nroles = ["api"]\n')
    s = load_settings({"SCHEDULER_CONFIG_FILE": str(path), "SCHEDULER_PLANNER_BATCH": "300"})
    assert (s.planner_batch, s.executor_batch, s.roles) == (300, 100, {"api"})


def test_toml_unknown_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cronwire.toml"
    path.write_text("planer_batch = 1\n")
    with pytest.raises(ConfigError, match="unknown key 'planer_batch'"):
        load_settings({"SCHEDULER_CONFIG_FILE": str(path)})


def test_settings_is_immutable() -> None:
    with pytest.raises(AttributeError):
        Settings().planner_batch = 3  # type: ignore[misc]


def test_the_shipped_example_config_is_valid() -> None:
    example = Path(__file__).resolve().parents[2] / "config" / "cronwire.example.toml"
    s = load_settings({}, example)
    assert s.claim_source == "postgres" and s.executor_workers == 256


@pytest.mark.parametrize("dsn", ["postgresql://[::1/db", "postgresql://u@[not-ipv6]:5432/db"])
def test_a_malformed_host_in_the_database_url_is_a_config_error(dsn: str) -> None:
    # Found by the config fuzz: urlsplit raised "Invalid IPv6 URL" past the loader.
    with pytest.raises(ConfigError, match="SCHEDULER_DATABASE_URL"):
        load_settings({"SCHEDULER_DATABASE_URL": dsn})


@pytest.mark.parametrize(
    ("environ", "allowed"),
    [
        ({}, True),  # dev mode: embedded database, API on loopback
        ({"SCHEDULER_HTTP_HOST": "localhost"}, True),
        ({"SCHEDULER_HTTP_HOST": "::1"}, True),
        ({"SCHEDULER_HTTP_HOST": "0.0.0.0"}, False),  # reachable from elsewhere: a deployment
        ({"SCHEDULER_HTTP_HOST": "10.1.2.3"}, False),
        ({"SCHEDULER_DATABASE_URL": "postgresql://db.example/cronwire"}, False),
        ({"SCHEDULER_ALLOW_PRIVATE_TARGETS": "false"}, False),  # said explicitly: it wins
        ({"SCHEDULER_DATABASE_URL": "postgresql://db.example/cronwire",
          "SCHEDULER_ALLOW_PRIVATE_TARGETS": "true"}, True),
    ],
)
def test_private_targets_are_allowed_only_in_dev_mode_unless_said(
    environ: dict[str, str], allowed: bool,
) -> None:
    settings = load_settings(environ)
    assert settings.allow_private_targets is allowed
    assert settings.dev_mode is (allowed and "SCHEDULER_ALLOW_PRIVATE_TARGETS" not in environ)
    assert Settings().allow_private_targets is False and not Settings().dev_mode  # by hand


def test_a_multi_host_database_url_is_accepted() -> None:
    """It was refused at start: "malformed port in DSN"."""
    url = "postgresql://postgres@127.0.0.1:5432,127.0.0.1:5433/cw?target_session_attrs=read-write"
    s = load_settings({"SCHEDULER_DATABASE_URL": url})
    assert s.database_url == url and s.database_read_url is None
    assert s.read_max_lag_seconds == 5.0


def test_a_read_url_and_its_staleness_bound() -> None:
    s = load_settings({
        "SCHEDULER_DATABASE_URL": "postgresql://u@p1,p2/cw?target_session_attrs=primary",
        "SCHEDULER_DATABASE_READ_URL": "postgresql://u@s1,s2/cw?target_session_attrs=prefer-standby",
        "SCHEDULER_READ_MAX_LAG_SECONDS": "1.5",
    })
    assert s.database_read_url == "postgresql://u@s1,s2/cw?target_session_attrs=prefer-standby"
    assert s.read_max_lag_seconds == 1.5


@pytest.mark.parametrize(("environ", "variable"), [
    ({"SCHEDULER_DATABASE_URL": "postgresql://h1,h2/cw?target_session_attrs=standby"},
     "SCHEDULER_DATABASE_URL: target_session_attrs=standby never reaches the primary"),
    ({"SCHEDULER_DATABASE_URL": "postgresql://h1:5432,h2:x/cw"},
     "SCHEDULER_DATABASE_URL: malformed port"),
    ({"SCHEDULER_DATABASE_READ_URL": "postgresql://s1/cw"},
     "SCHEDULER_DATABASE_READ_URL: needs SCHEDULER_DATABASE_URL"),
    ({"SCHEDULER_DATABASE_URL": "postgresql://h/cw", "SCHEDULER_DATABASE_READ_URL": "s1:5432"},
     "SCHEDULER_DATABASE_READ_URL: must be a postgresql:// URL"),
    ({"SCHEDULER_DATABASE_URL": "postgresql://h/cw", "SCHEDULER_READ_MAX_LAG_SECONDS": "0"},
     "SCHEDULER_READ_MAX_LAG_SECONDS: must be a finite number greater than 0"),
])
def test_a_bad_high_availability_setting_is_one_line_naming_it(
    environ: dict[str, str], variable: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(environ)
    assert str(refused.value).startswith(variable) and "\n" not in str(refused.value)
