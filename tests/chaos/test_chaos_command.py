"""`cronwire chaos`, reduced: every postgres-mode fault once, through the real command.

One run of the command serves every test here (one embedded Postgres, one scenario per
fault, about two minutes on an idle 2-core machine); each test reads its fault's figures
from report.json. CRONWIRE_CHAOS_FULL=1 runs the full size (3 replicas, 300 schedules
firing every second, 30 s per fault, a 50,000-run burst) instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.chaos_command import FULL, run_chaos
from tests.support.servers import own_directory

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(1800)]

POSTGRES_FAULTS = "kill,stall,pg-restart,connection-cuts,lease-cut,clock-skew,fairness"
# lease-cut's own figures are asserted at full size only: reduced (20 schedules) on a busy
# machine the cut-off replica's claims sometimes lost every race, so there was nothing to
# cut off (1 run in 2). Reduced, it runs for its verdict: ok or INCONCLUSIVE, never FAILED
# for having tested nothing.
POSTGRES_FAULTS_REDUCED = "kill,stall,pg-restart,connection-cuts,lease-cut,clock-skew,fairness"
KAFKA_FAULTS = "kill,stall,broker-kill,broker-stall,rolling-restart,fairness"
# Reduced in CI: kill -9, broker restarts and rolling restarts in kafka mode are already
# counted by tests/chaos/test_kafka_processes.py; these are the faults only chaos injects.
# Kafka-mode fairness runs at full size only (reduced, it measured a p99 of 1.8 s against
# the 2 s bound on an idle machine: too close to hold in a shared CI run).
KAFKA_FAULTS_REDUCED = "stall,broker-stall"


@pytest.fixture(scope="module")
def postgres_run() -> Iterator[tuple[subprocess.CompletedProcess[str], dict[str, Any]]]:
    with own_directory("cronwire-chaos-") as out:  # its Postgres lives there: not tmp_path
        yield run_chaos(out, "postgres", POSTGRES_FAULTS if FULL else POSTGRES_FAULTS_REDUCED)


@pytest.fixture(scope="module")
def scenarios(postgres_run: tuple[subprocess.CompletedProcess[str], dict[str, Any]]) -> dict[str, Any]:
    _done, report = postgres_run
    for name, figures in report["scenarios"].items():
        print(f"chaos {name}: {json.dumps(figures, sort_keys=True, default=str)}")
    return dict(report["scenarios"])


def _delivered_everything(figures: dict[str, Any]) -> None:
    assert figures["planned"] > 0
    assert figures["lost"] == 0, figures
    assert figures["delivered"] == figures["planned"]


def test_the_command_prints_a_table_and_then_one_json_line(
    postgres_run: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    done, report = postgres_run
    lines = done.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["fault", "planned", "delivered", "lost"]
    last = json.loads(lines[-1])
    assert last["passed"] == report["passed"] and set(last["scenarios"]) == set(report["scenarios"])
    assert done.returncode == (0 if report["passed"] else 1)


def test_kill_9_loses_nothing_and_duplicates_only_what_was_in_flight(scenarios: dict[str, Any]) -> None:
    kill = scenarios["kill"]
    _delivered_everything(kill)
    assert kill["fault_figures"]["kills"] >= 1
    assert kill["duplicates_beyond_in_flight"] == 0, kill
    assert kill["duplicates"] == kill["duplicates_in_flight_at_kill"]


def test_a_stalled_owner_writes_no_terminal_result_after_the_reclaim(scenarios: dict[str, Any]) -> None:
    stall = scenarios["stall"]
    _delivered_everything(stall)
    own = stall["fault_figures"]
    assert own["paused_seconds"] > own["lease_seconds"]
    assert own["reclaimed_while_paused"] > 0  # the fault did take leases away
    assert own["stale_terminal_writes"] == 0


def test_a_stalled_owner_sends_nothing_after_its_lease_expired_but_a_write_it_had_begun(
    scenarios: dict[str, Any],
) -> None:
    # Was one late send in about one run in three, while the send deadline was a duration
    # measured again on entering the deliverer (ADR 0022). What remains is a stop landing
    # between the last reading of the deadline and the write: the replica counts that one
    # (scheduler_sends_after_deadline_total), and it is the only duplicate allowed.
    _only_the_write_it_had_begun(scenarios["stall"])


def _only_the_write_it_had_begun(figures: dict[str, Any]) -> None:
    late = figures["fault_figures"].get("sends_after_deadline", 0)
    assert late <= 1
    assert figures["duplicates_beyond_in_flight"] <= late, figures


@pytest.mark.parametrize("fault", ["pg-restart", "connection-cuts"])
def test_database_outages_shorter_than_the_lease_lose_and_duplicate_nothing(
    scenarios: dict[str, Any], fault: str
) -> None:
    figures = scenarios[fault]
    _delivered_everything(figures)
    assert figures["duplicates"] == 0, figures
    assert figures["replica_exits"] == 0, figures.get("replica_exit_reasons")  # no restart
    assert figures["violations"] == []


def test_postgres_was_really_restarted_twice(scenarios: dict[str, Any]) -> None:
    own = scenarios["pg-restart"]["fault_figures"]
    assert own["restarts"] == 2
    assert max(own["outage_seconds"]) < own["lease_seconds"]


def test_connection_cuts_really_cut(scenarios: dict[str, Any]) -> None:
    own = scenarios["connection-cuts"]["fault_figures"]
    assert own.get("connections_dropped", 0) + own.get("connections_reset", 0) > 0
    assert own["connections_opened"] > 3 * 2  # the replicas reconnected


def test_a_lease_cut_that_tested_nothing_is_inconclusive_not_failed(
    postgres_run: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    done, report = postgres_run
    cut = report["scenarios"]["lease-cut"]
    last = json.loads(done.stdout.strip().splitlines()[-1])
    row = next(line for line in done.stdout.splitlines() if line.startswith("lease-cut "))
    assert cut["violations"] == [], cut  # nothing re-claimed is no broken guarantee
    if cut["fault_figures"]["reclaimed_after_expiry"]:
        assert cut["outcome"] == "ok" and " ok" in row, row
    else:  # said so, in the table and the JSON line, and not a failure of the run
        assert cut["outcome"] == "INCONCLUSIVE", cut
        assert "INCONCLUSIVE: nothing re-claimed after the cut" in row, row
        assert "nothing re-claimed" in last["inconclusive"]["lease-cut"]
        assert "lease-cut" not in last["failed"]


@pytest.mark.skipif(not FULL, reason="lease-cut's figures are asserted with CRONWIRE_CHAOS_FULL=1")
def test_a_replica_that_cannot_renew_its_leases_stops_delivering(scenarios: dict[str, Any]) -> None:
    cut = scenarios["lease-cut"]
    _delivered_everything(cut)
    own = cut["fault_figures"]
    assert own["leases_cut_off"] > 0 and own["cut_seconds"] > own["lease_seconds"]
    assert own["sends_beyond_in_flight_at_cut"] == 0, own
    assert cut["duplicates_beyond_in_flight"] == 0, cut
    assert own["reclaimed_after_expiry"] > 0  # the others took its runs over
    if own["firing_seconds_after_release"] >= 5:  # time to show it (the full-size run)
        assert own["cut_replica_runs_after_release"] > 0  # recovered without a restart
    assert cut["replica_exits"] == 0, cut.get("replica_exit_reasons")


def test_skewed_replica_clocks_fire_nothing_early_late_or_twice(scenarios: dict[str, Any]) -> None:
    skew = scenarios["clock-skew"]
    _delivered_everything(skew)
    own = skew["fault_figures"]
    assert (own["early"], own["late"], skew["duplicates"]) == (0, 0, 0)
    for name, injected in own["skews_injected"].items():
        assert own["skew_gauge_seconds"][name] == pytest.approx(injected, abs=2)
        assert name in own["lag_p99_ms_by_replica"]  # the skewed replica did deliver


def test_a_burst_does_not_starve_small_tenants(scenarios: dict[str, Any]) -> None:
    fair = scenarios["fairness"]
    _delivered_everything(fair)
    own = fair["fault_figures"]
    assert own["small_runs_during_burst"] > 0
    assert own["small_lag_p99_ms"] < 2000, own


@pytest.mark.parametrize(("args", "message"), [
    (["--faults", "nope"], "--faults: unknown fault 'nope'"),
    (["--faults", "broker-kill"], "--faults: broker-kill needs --mode kafka"),
    (["--replicas", "1"], "--replicas"),
])
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "cronwire.cli", "chaos", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def kafka_scenarios() -> dict[str, Any]:
    faults = KAFKA_FAULTS if FULL else KAFKA_FAULTS_REDUCED
    with own_directory("cronwire-chaos-kafka-") as out:
        _done, report = run_chaos(out, "kafka", faults)
    return dict(report["scenarios"])


def test_kafka_mode_loses_nothing_under_broker_and_replica_faults(
    kafka_scenarios: dict[str, Any],
) -> None:
    for figures in kafka_scenarios.values():
        _delivered_everything(figures)
        _only_the_write_it_had_begun(figures)  # 0 for every fault but a stop


def test_kafka_mode_stalled_owner_sends_nothing_after_its_lease_expired(
    kafka_scenarios: dict[str, Any],
) -> None:
    _only_the_write_it_had_begun(kafka_scenarios["stall"])


def test_kafka_mode_fairness_is_not_run_at_the_reduced_size_and_the_command_says_so() -> None:
    # Nothing starts: the only fault asked for is too small for its bound at this size.
    with own_directory("cronwire-chaos-kafka-fair-") as out:
        done = subprocess.run(
            [sys.executable, "-m", "cronwire.cli", "chaos", "--mode", "kafka", "--faults",
             "fairness", "--replicas", "3", "--out", str(out), "--schedules", "20",
             "--duration", "8", "--burst", "3000"],
            capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    last = json.loads(lines[-1])
    assert last["not_run"]["fairness"] in lines
    assert "--duration 30 --burst 50000" in last["not_run"]["fairness"]
    assert last["scenarios"] == {} and last["passed"] is True


@pytest.mark.skipif(not FULL, reason="kafka-mode fairness runs with CRONWIRE_CHAOS_FULL=1")
def test_kafka_mode_keeps_small_tenants_on_time_during_a_burst(
    kafka_scenarios: dict[str, Any],
) -> None:
    assert kafka_scenarios["fairness"]["fault_figures"]["small_lag_p99_ms"] < 2000
