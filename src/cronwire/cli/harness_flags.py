"""`cronwire loadtest` and `cronwire chaos`: their flags, checked before anything starts,
and the plans they hand to the harnesses. A flag the harness would refuse is a
ConfigError naming it (one line, exit 2); a run that fails midway exits 1."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cronwire.config import Settings
from cronwire.domain.errors import ConfigError

T = TypeVar("T")


def _host_ports(raw: str) -> str:
    for server in raw.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(f"expected host:port[,host:port...], got {raw!r}")
    return raw


def cmd_loadtest(settings: Settings, args: argparse.Namespace) -> int:
    import dataclasses
    import importlib.util

    from cronwire.bootstrap.factories import check_buildable
    from cronwire.domain.cron import parse_cron
    from cronwire.domain.errors import InvalidCron
    from cronwire.harness.processes import HarnessError
    from cronwire.loadtest.plan import LoadTestPlan
    from cronwire.loadtest.run import run_loadtest
    from cronwire.loadtest.sinks import choose_sink

    try:
        parse_cron(args.cron)
    except InvalidCron as exc:
        raise ConfigError(f"--cron: {exc}") from None
    if args.kafka_bootstrap is not None and args.mode != "kafka":
        raise ConfigError("--kafka-bootstrap: only with --mode kafka")
    try:  # refuse what the replicas would refuse, before starting anything
        check_buildable(dataclasses.replace(
            settings, claim_source=args.mode, roles=frozenset({"planner", "executor"}),
            kafka_bootstrap_servers=args.kafka_bootstrap,
        ))
    except ConfigError as exc:
        if args.kafka_bootstrap:
            reason = str(exc).removeprefix("SCHEDULER_KAFKA_BOOTSTRAP_SERVERS: ")
            raise ConfigError(f"--kafka-bootstrap: {reason}") from None
        raise ConfigError(f"--mode {args.mode}: {exc}") from None
    if args.statements and settings.database_url is not None:
        raise ConfigError("--statements: only with the Postgres the load test starts itself "
                          "(unset SCHEDULER_DATABASE_URL)")
    if args.compare and importlib.util.find_spec("pgqueuer") is None:
        raise ConfigError("--compare: pgqueuer is not installed; pip install 'cronwire[bench]'")
    sink = choose_sink(args.sink, args.sink_latency_ms, args.sink_failure_rate)
    plan = LoadTestPlan(
        mode=args.mode, scenario=args.scenario, schedules=args.schedules,
        replicas=args.replicas, duration=args.duration, out=args.out, cron=args.cron,
        workers=args.workers, dsn=settings.database_url, sink_latency_ms=args.sink_latency_ms,
        sink_failure_rate=args.sink_failure_rate, compare=args.compare,
        keep_data=args.keep_data, kafka_bootstrap=args.kafka_bootstrap,
        jitter_seconds=args.jitter_seconds, sink=sink, statements=args.statements,
    )
    try:
        report = run_loadtest(plan)
    except HarnessError as exc:  # LoadTestError, or a process that would not start
        print(f"cronwire: loadtest: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report.summary))
    return 0


def cmd_chaos(settings: Settings, args: argparse.Namespace) -> int:
    from cronwire.chaos.faults import DEFAULT_FAULTS
    from cronwire.chaos.plan import ChaosPlan
    from cronwire.chaos.plan_checks import fault_refusal
    from cronwire.chaos.run import run_chaos

    faults = tuple(f.strip() for f in (args.faults or "").split(",") if f.strip())
    faults = faults or DEFAULT_FAULTS[args.mode]
    refusal = fault_refusal(args.mode, faults, settings.database_url)
    if refusal is not None:
        raise ConfigError(refusal)
    plan = ChaosPlan(
        mode=args.mode, faults=faults, schedules=args.schedules, replicas=args.replicas,
        duration=args.duration, out=args.out, burst=args.burst, seed=args.seed,
        dsn=settings.database_url, keep_data=args.keep_data,
    )
    report = run_chaos(plan)
    print(json.dumps({k: v for k, v in report.items() if k != "scenarios"} | {
        "scenarios": {name: {k: v for k, v in figures.items() if k != "beyond_in_flight_runs"}
                      for name, figures in report["scenarios"].items()}}, default=str))
    return 0 if report["passed"] else 1


class _DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Every option's default in its help, and the epilog's example kept as written."""


def _bounded(kind: Callable[[str], T], low: T, high: T) -> Callable[[str], T]:
    def parse(text: str) -> T:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not low <= value <= high:  # type: ignore[operator]
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {text}")
        return value

    return parse


def add_harness_commands(commands: argparse._SubParsersAction[Any]) -> None:
    """`loadtest` and `chaos` as commands of `cronwire`."""
    loadtest = commands.add_parser(
        "loadtest",
        help="start Postgres (and a broker), a sink and R replicas; fire N schedules; "
        "print one JSON line of results",
        description="Start everything a load test needs on loopback (embedded Postgres,\n"
        "the embedded broker for --mode kafka, a fast HTTP sink, R `cronwire serve`\n"
        "replicas), create N schedules, show a progress line on stderr, and print one\n"
        "JSON line of results. Writes OUT/report.json and OUT/report.png.",
        epilog="example: the seed's worst case, 100,000 runs due at one instant, "
        "compared with the machine's bound and pgqueuer:\n"
        "  cronwire loadtest --scenario burst --schedules 100000 --replicas 1 --compare",
        formatter_class=_DefaultsHelp,
    )
    loadtest.add_argument("--mode", choices=["postgres", "kafka"], default="postgres",
                          help="the replicas' claim source (SCHEDULER_CLAIM_SOURCE)")
    loadtest.add_argument("--kafka-bootstrap", type=_host_ports, default=None,
                          metavar="HOST:PORT[,HOST:PORT...]",
                          help="--mode kafka against a broker you run (any Kafka; a fresh "
                          "topic and consumer group per run, left on the broker); by "
                          "default the embedded broker")
    loadtest.add_argument("--scenario", choices=["burst", "steady"], default="steady",
                          help="burst: every schedule due once at one instant (--duration "
                          "ignored); steady: every schedule fires every second")
    loadtest.add_argument("--schedules", type=_bounded(int, 1, 1_000_000), default=1000,
                          help="schedules created (N)")
    loadtest.add_argument("--replicas", type=_bounded(int, 1, 16), default=2,
                          help="`cronwire serve` processes, each planner + executor")
    loadtest.add_argument("--duration", type=_bounded(float, 1.0, 3600.0), default=30.0,
                          help="steady: seconds of firing")
    loadtest.add_argument("--out", type=Path, default=Path("loadtest-out"),
                          help="where report.json and report.png go")
    loadtest.add_argument("--compare", action="store_true",
                          help="also measure, in this run, the machine's bound (batched "
                          "claim + terminal write without HTTP; wrk posting to nginx "
                          "without a database, or a bare aiohttp client where either is "
                          "missing) and pgqueuer doing the same job (needs .[bench])")
    loadtest.add_argument("--sink", choices=["nginx", "python"], default=None,
                          help="the receiver: nginx (answers 200 at once, records from its "
                          "access log; costs the cores next to nothing) or the harness's "
                          "Python sink (which can also be slow or fail); default nginx "
                          "when installed and neither --sink-latency-ms nor "
                          "--sink-failure-rate is set, else python")
    loadtest.add_argument("--sink-latency-ms", type=_bounded(float, 0.0, 60_000.0),
                          default=0.0, help="the sink holds every answer this long")
    loadtest.add_argument("--sink-failure-rate", type=_bounded(float, 0.0, 1.0),
                          default=0.0, help="fraction of requests the sink answers 503 "
                          "(retries and the circuit breaker run under load)")
    loadtest.add_argument("--keep-data", action="store_true",
                          help="keep the Postgres data directory, logs and the sink's "
                          "records in OUT (by default only the reports stay)")
    loadtest.add_argument("--cron", default="* * * * * *",
                          help="the cron every schedule shares (steady)")
    loadtest.add_argument("--workers", type=_bounded(int, 1, 10_000), default=256,
                          help="SCHEDULER_EXECUTOR_WORKERS per replica")
    loadtest.add_argument("--jitter-seconds", type=_bounded(int, 0, 3600), default=0,
                          help="every schedule's jitter_seconds; fire lag is then measured "
                          "from each occurrence's fire_after (its jittered time)")
    loadtest.add_argument("--statements", action="store_true",
                          help="the embedded Postgres loads pg_stat_statements; after the "
                          "drain, the ten heaviest statements of the first instant to the "
                          "end are logged, each with its statement time per delivered "
                          "run, and for the statements most often active, their share "
                          "on the CPU and in each wait (pg_stat_activity, every 10 ms)")
    loadtest.set_defaults(handler=cmd_loadtest)

    chaos = commands.add_parser(
        "chaos",
        help="start Postgres (and a broker), a sink and R replicas; inject faults while "
        "schedules fire every second; count lost and duplicate deliveries (exit 1 if any "
        "guarantee broke)",
        description="Fault-injection harness: every fault runs against a fresh database and "
        "fresh replicas, counted from the receiver's side. A fault that tested nothing is "
        "INCONCLUSIVE (said so, not a failure); one whose bound needs a bigger run is not "
        "run, and a line names the size it needs.",
        epilog="example:\n  cronwire chaos --faults kill,pg-restart --schedules 200 --duration 20",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chaos.add_argument("--mode", choices=["postgres", "kafka"], default="postgres",
                       help="claim source of the replicas (default postgres)")
    chaos.add_argument("--faults", default="",
                       help="comma-separated: kill, stall, pg-restart, connection-cuts, "
                       "lease-cut, clock-skew, fairness, rolling-restart, failover, "
                       "failover-async, broker-kill, broker-stall (default: every fault of "
                       "the mode; docs/chaos.md says what each does)")
    chaos.add_argument("--schedules", type=_bounded(int, 1, 100_000), default=300,
                       help="schedules firing every second (default 300)")
    chaos.add_argument("--replicas", type=_bounded(int, 2, 16), default=3,
                       help="replica processes, 2..16 (default 3)")
    chaos.add_argument("--duration", type=_bounded(float, 5.0, 3600.0), default=30.0,
                       help="seconds of firing per fault (default 30)")
    chaos.add_argument("--burst", type=_bounded(int, 1, 1_000_000), default=50_000,
                       help="runs due at once for the fairness fault (default 50000)")
    chaos.add_argument("--seed", type=int, default=0, help="random seed of the fault timing (default 0)")
    chaos.add_argument("--out", type=Path, default=Path("chaos-out"),
                       help="report.json and per-fault logs (default ./chaos-out)")
    chaos.add_argument("--keep-data", action="store_true",
                       help="keep the embedded Postgres's data directory in OUT (by default "
                       "only its log, postgres.log, stays beside the reports)")
    chaos.set_defaults(handler=cmd_chaos)
