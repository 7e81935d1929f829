"""cronwire.logs: one JSON object per line with the agreed keys, levels and formats from
the configuration, and secrets masked whatever logged them."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from cronwire.config import load_settings
from cronwire.domain.errors import ConfigError
from cronwire.logs import configure_logging, redact, warn_about_settings
from tests.support.processes import clean_env, run_cli

TOKEN = "cwt_Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MDEyMzQ1Njc4OTA"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
PASSWORD = "pg-Pa55word-9f3k"
HEADER_VALUE = "hdr-value-81c2e"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    yield stream
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def _configure(stream: io.StringIO, **env: str) -> None:
    settings = load_settings({f"SCHEDULER_{k.upper()}": v for k, v in env.items()})
    configure_logging(settings, stream)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_ts_level_action_message_and_ids(captured: io.StringIO) -> None:
    _configure(captured, log_format="json")
    log = logging.getLogger("cronwire.service.executor")
    log.info("delivered %s", "run", extra={"action": "run.delivered", "run_id": "r-1",
                                           "schedule_id": "s-1", "tenant_id": "t-1"})
    log.debug("not shown at info")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    first, second = _lines(captured)
    assert first["action"] == "run.delivered" and first["message"] == "delivered run"
    assert first["level"] == "info" and str(first["ts"]).endswith("+00:00")
    assert (first["run_id"], first["schedule_id"], first["tenant_id"]) == ("r-1", "s-1", "t-1")
    assert second["level"] == "error" and "ValueError: boom" in str(second["exc"])
    assert second["action"] == "executor.test_json_lines_carry_ts_level_action_message_and_ids"


def test_level_and_text_format_follow_the_settings(captured: io.StringIO) -> None:
    _configure(captured, log_format="text", log_level="warning")
    logging.getLogger("cronwire").info("quiet")
    logging.getLogger("cronwire").warning("loud", extra={"run_id": "r-2"})
    lines = captured.getvalue().splitlines()
    assert len(lines) == 1 and "WARNING cronwire: loud [run_id=r-2]" in lines[0]


def test_auto_is_json_when_not_a_terminal(captured: io.StringIO) -> None:
    _configure(captured)  # log_format defaults to auto; a StringIO is no terminal
    logging.getLogger("cronwire").info("hello")
    assert _lines(captured)[0]["message"] == "hello"


@pytest.mark.parametrize(("variable", "value"), [("LOG_LEVEL", "verbose"), ("LOG_FORMAT", "xml")])
def test_bad_log_settings_name_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"SCHEDULER_{variable}"):
        load_settings({f"SCHEDULER_{variable}": value})


def test_secrets_never_reach_a_line(captured: io.StringIO) -> None:
    _configure(captured, log_format="json",
               database_url=f"postgresql://cronwire:{PASSWORD}@db.internal:5432/cronwire")
    log = logging.getLogger("cronwire")
    log.info("auth header Authorization: Bearer %s", TOKEN)
    log.info("token=%s secret=%s", TOKEN, SECRET)
    log.warning("connect to postgresql://cronwire:%s@db.internal/cronwire failed", PASSWORD)
    log.warning("password in an error: %s", PASSWORD)  # registered from the DSN
    log.info("target %s", {"url": "https://x.example/h", "headers": {"X-Api-Key": HEADER_VALUE}})
    log.info('json target {"headers": {"x-custom": "%s"}}', HEADER_VALUE)
    log.info("X-Api-Key: %s", HEADER_VALUE)
    text = captured.getvalue()
    assert len(text.splitlines()) == 7
    for secret in (TOKEN, SECRET, PASSWORD, HEADER_VALUE):
        assert secret not in text
    assert "[redacted]" in text


def test_redaction_leaves_ordinary_text_alone() -> None:
    plain = "applied migrations [1, 4]; basic checks passed; 12 runs claimed by replica-a"
    assert redact(plain) == plain


def test_private_targets_warning(captured: io.StringIO) -> None:
    _configure(captured, log_format="json")
    warn_about_settings(load_settings({"SCHEDULER_ALLOW_PRIVATE_TARGETS": "true"}))
    warn_about_settings(load_settings({"SCHEDULER_HTTP_HOST": "0.0.0.0"}))  # refused: silent
    (line,) = _lines(captured)
    assert line["level"] == "warning" and "SCHEDULER_ALLOW_PRIVATE_TARGETS" in str(line["message"])


def test_dev_mode_says_so_in_one_line(captured: io.StringIO) -> None:
    _configure(captured, log_format="json")
    warn_about_settings(load_settings({}))
    (line,) = _lines(captured)
    assert line["action"] == "startup.dev_mode" and str(line["message"]).startswith("dev mode")
    assert "SCHEDULER_ALLOW_PRIVATE_TARGETS" in str(line["message"])


@pytest.mark.parametrize(("variable", "value"), [("SCHEDULER_LOG_LEVEL", "loud"),
                                                 ("SCHEDULER_LOG_FORMAT", "yaml")])
def test_cli_refuses_a_bad_log_setting_in_one_line(variable: str, value: str) -> None:
    result = run_cli("migrate", env=clean_env(**{variable: value}))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert variable in line and result.stdout == ""
