"""`cronwire chaos` leaves its reports and logs in --out, not its database (once, a
139 MB Postgres data directory stayed behind after every run). The shared server of a
chaos run is started and stopped as the command does; `--keep-data` keeps it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwire.chaos.plan import ChaosPlan
from cronwire.chaos.run import _postgres
from cronwire.cli.main import build_parser
from tests.support.servers import own_directory


def _plan(out: Path, keep_data: bool) -> ChaosPlan:
    asked = {"keep_data": True} if keep_data else {}  # the default is what a user gets
    return ChaosPlan(mode="postgres", faults=("kill",), schedules=1, replicas=2,
                     duration=5.0, out=out, **asked)


@pytest.mark.parametrize("keep_data", [False, True])
async def test_the_shared_postgres_leaves_its_log_and_only_keeps_its_data_when_asked(
    keep_data: bool,
) -> None:
    with own_directory("cronwire-chaos-out-") as out:
        async with _postgres(_plan(out, keep_data), ["kill"]) as (admin, postgres):
            assert admin is not None and postgres is not None
            assert (out / "postgres" / "PG_VERSION").exists()  # the server really ran there
        assert (out / "postgres").exists() is keep_data, sorted(p.name for p in out.iterdir())
        if not keep_data:
            assert (out / "postgres.log").stat().st_size > 0  # its log stays for the reader
            assert not (out / ".pg-bin").exists()


def test_the_command_has_a_keep_data_flag() -> None:
    args = build_parser().parse_args(["chaos", "--keep-data"])
    assert args.keep_data is True
    assert build_parser().parse_args(["chaos"]).keep_data is False
