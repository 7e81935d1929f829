"""The configuration loader, fuzzed: whatever the environment and the TOML file hold,
``load_settings`` returns Settings or raises ConfigError (one line naming the variable),
never any other exception, so `cronwire` never shows a traceback for bad configuration.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwire.config import PREFIX, Settings, describe, load_settings
from cronwire.domain.errors import ConfigError

VARIABLES = [name for name, _ in describe()]
# Values near the parsers' edges as well as arbitrary text.
TRICKY = st.sampled_from([
    "", " ", "0", "-1", "1e400", "nan", "inf", "-inf", "0x10", "1_000", "65536", "true",
    "off", "TRUE ", "postgresql://", "postgresql://h:99999/db", "postgresql://[::1/db",
    "postgres://?host=/tmp", "host:", ":9092", "a:1,b", "api,,planner", "\x00", "é", "1" * 400,
])
VALUES = st.one_of(TRICKY, st.text(max_size=60), st.integers().map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(str))
ENVIRONMENTS = st.dictionaries(st.sampled_from(VARIABLES), VALUES, max_size=8)
TOML_VALUES = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(),
                        st.text(max_size=30), st.lists(st.text(max_size=10), max_size=3))


def _outcome(environ: dict[str, str], config_file: Path | None = None) -> Settings | ConfigError:
    try:
        return load_settings(environ, config_file)
    except ConfigError as exc:
        message = str(exc)
        assert message and "\n" not in message
        return exc


@settings(max_examples=300, deadline=None)
@given(ENVIRONMENTS)
def test_any_environment_gives_settings_or_a_config_error(environ: dict[str, str]) -> None:
    outcome = _outcome(environ)
    if isinstance(outcome, ConfigError):
        assert str(outcome).startswith(PREFIX)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from([v.removeprefix(PREFIX).lower() for v in VARIABLES]),
                       TOML_VALUES, max_size=5),
       st.binary(max_size=40))
def test_any_toml_file_gives_settings_or_a_config_error(values: dict[str, object], junk: bytes) -> None:
    lines = []
    for key, value in values.items():
        if isinstance(value, str):
            lines.append(f"{key} = {value!r}".replace("\\", "\\\\"))
        elif isinstance(value, bool):
            lines.append(f"{key} = {str(value).lower()}")
        elif isinstance(value, list):
            lines.append(f"{key} = [{', '.join(repr(v) for v in value)}]")
        else:
            lines.append(f"{key} = {value}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cronwire.toml"
        path.write_bytes("\n".join(lines).encode() + b"\n" + junk)
        _outcome({}, path)


def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    """Found by the fuzz above: a Latin-1 file raised UnicodeDecodeError (a traceback)."""
    path = tmp_path / "cronwire.toml"
    path.write_bytes(b"planner_batch = 5\n# caf\xe9\n")
    outcome = _outcome({}, path)
    assert isinstance(outcome, ConfigError) and "CONFIG_FILE" in str(outcome)
