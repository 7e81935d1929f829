"""Load-test accounting from the receiver's side, and the chart."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from cronwire.harness.stats import per_run_us, percentile

if TYPE_CHECKING:
    from cronwire.loadtest.wal import WalWritten


@dataclass(frozen=True, slots=True)
class Baselines:
    """What --compare measured in the same invocation (runs/s)."""

    bound_db: float
    bound_http: float  # wrk to nginx; the aiohttp figure when either is missing
    ceiling: float  # 1 / (1/bound_db + 1/bound_http)
    pgqueuer: float
    aiohttp_http: float = 0.0  # a bare aiohttp client to the sink, for reference
    bound_http_source: str = "wrk+nginx"  # or "aiohttp"
    bound_http_note: str | None = None  # why the fallback, when there was one
    pgqueuer_config: str = ""  # the configuration pgqueuer did best in
    pgqueuer_sweep: tuple[tuple[str, float], ...] = ()  # every configuration tried, jobs/s
    # the best configuration's CPU per job (µs) by who spent it: worker, postgres, sink
    pgqueuer_cpu_us_per_job: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Costs:
    """CPU seconds the replicas, the sink and Postgres used from the first instant to the
    end of the drain (None where /proc could not tell, or Postgres is not ours), and which
    sink answered."""

    replica_seconds: float | None = None
    sink_seconds: float | None = None
    sink: str = "python"
    postgres_seconds: float | None = None
    wal: WalWritten | None = None  # what the server wrote in the window, when it is ours
    # The whole machine over the same window (every process and the kernel, /proc/stat),
    # so the parties' share of the cores can be told from the cores left idle.
    machine_busy_seconds: float | None = None
    window_seconds: float | None = None


@dataclass
class Report:
    summary: dict[str, object]
    per_second: dict[int, int] = field(default_factory=dict)  # second -> first acks
    lag_by_second: dict[int, list[float]] = field(default_factory=dict)  # ack second -> lags
    baselines: Baselines | None = None


def _ratio(value: float, reference: float) -> float:
    return round(value / reference, 3) if reference > 0 else 0.0


def build_report(
    mode: str, scenario: str, schedules: int, replicas: int, planned: dict[str, datetime],
    acknowledgements: Iterable[tuple[str, float]], drain_seconds: float,
    baselines: Baselines | None = None, costs: Costs | None = None,
) -> Report:
    """``planned`` maps each occurrence's webhook-id to its instant; ``acknowledgements``
    are the sink's (webhook-id, time) of every 2xx answer, whichever sink it was. A second
    one for the same id is a duplicate. Throughput is delivered / seconds from the first
    instant to the last acknowledgement."""
    acked: dict[str, float] = {}
    duplicates = 0
    for webhook_id, answered_at in acknowledgements:
        if webhook_id in acked:
            duplicates += 1
        else:
            acked[webhook_id] = answered_at
    lags: list[float] = []
    per_second: Counter[int] = Counter()
    lag_by_second: dict[int, list[float]] = {}
    first_instant = min(planned.values()).timestamp() if planned else 0.0
    last_ack = first_instant
    for webhook_id, instant in planned.items():
        at = acked.get(webhook_id)
        if at is None:
            continue
        lag = at - instant.timestamp()
        lags.append(lag)
        last_ack = max(last_ack, at)
        second = int(at - first_instant)
        per_second[second] += 1
        lag_by_second.setdefault(second, []).append(lag)
    lags.sort()
    delivered = len(lags)
    elapsed = max(last_ack - first_instant, 1e-9)
    runs_per_second = round(delivered / elapsed, 1) if delivered else 0.0
    summary: dict[str, object] = {
        "mode": mode,
        "scenario": scenario,
        "schedules": schedules,
        "replicas": replicas,
        "planned": len(planned),
        "delivered": delivered,
        "duplicates": duplicates,
        "lost": len(planned) - delivered,
        "runs_per_second": runs_per_second,
        "fire_lag_p50_ms": round(percentile(lags, 0.50) * 1000, 1),
        "fire_lag_p95_ms": round(percentile(lags, 0.95) * 1000, 1),
        "fire_lag_p99_ms": round(percentile(lags, 0.99) * 1000, 1),
        "drain_seconds": round(drain_seconds, 2),
    }
    if baselines is not None:
        summary.update(_compared(runs_per_second, delivered, baselines, costs or Costs()))
    return Report(summary, dict(per_second), lag_by_second, baselines)


def _compared(runs_per_second: float, delivered: int, baselines: Baselines,
              costs: Costs) -> dict[str, object]:
    """--compare's keys: CONTRACT.md's (ceiling, pgqueuer and the ratios to them), then
    what the bound was made of, the reference figures, which sink answered cronwire,
    pgqueuer and the aiohttp client, and CPU per delivered run."""
    compared: dict[str, object] = {
        "ceiling_runs_per_second": round(baselines.ceiling, 1),
        "pgqueuer_runs_per_second": round(baselines.pgqueuer, 1),
        "pgqueuer_config": baselines.pgqueuer_config,
        "pgqueuer_sweep": dict(baselines.pgqueuer_sweep),
        "ratio_to_ceiling": _ratio(runs_per_second, baselines.ceiling),
        "ratio_to_pgqueuer": _ratio(runs_per_second, baselines.pgqueuer),
        "ratio_to_bound": _ratio(runs_per_second, baselines.ceiling),  # the ceiling is it
        "bound_db_per_second": round(baselines.bound_db, 1),
        "bound_http_per_second": round(baselines.bound_http, 1),
        "bound_http_source": baselines.bound_http_source,
        "aiohttp_http_per_second": round(baselines.aiohttp_http, 1),
        "sink": costs.sink,
        "replica_cpu_us_per_run": per_run_us(0.0, costs.replica_seconds, delivered),
        "sink_cpu_us_per_run": per_run_us(0.0, costs.sink_seconds, delivered),
        "postgres_cpu_us_per_run": per_run_us(0.0, costs.postgres_seconds, delivered),
        "pgqueuer_cpu_us_per_job": dict(baselines.pgqueuer_cpu_us_per_job),
    }
    if baselines.bound_http_note:
        compared["bound_http_note"] = baselines.bound_http_note
    return compared


def _plural(count: object, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}" if isinstance(count, int) else f"{count} {word}s"


def write_chart(report: Report, path: Path, jitter_seconds: int = 0) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = report.summary
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.4), sharex=True)
    seconds = sorted(report.per_second)
    top.bar(seconds, [report.per_second[x] for x in seconds], width=1.0, align="edge",
            color="#3b7dd8", label=f"cronwire ({s['runs_per_second']:,}/s overall)")
    if report.baselines is not None:
        top.axhline(report.baselines.ceiling, color="#2a9d47", linestyle="--",
                    label=f"bound: claim+write and {report.baselines.bound_http_source} "
                    f"({report.baselines.ceiling:,.0f}/s)")
        top.axhline(report.baselines.pgqueuer, color="#d2691e", linestyle=":",
                    label=f"pgqueuer, same job ({report.baselines.pgqueuer:,.0f}/s)")
    peak = max([*report.per_second.values(), report.baselines.ceiling if report.baselines else 0, 1])
    top.set_ylim(0, peak * 1.35)  # room for the totals above the bars
    top.legend(loc="upper right", fontsize=8)
    top.set_ylabel("deliveries acknowledged / s")
    top.set_title(
        f"cronwire loadtest: {s['mode']} mode, {s.get('scenario', '')}, "
        f"{_plural(s['schedules'], 'schedule')}, {_plural(s['replicas'], 'replica')}"
        + (f", jitter {jitter_seconds} s" if jitter_seconds else ""),
        fontsize=11,
    )
    top.text(
        0.01, 0.97,
        f"planned {s['planned']:,}   delivered {s['delivered']:,}   lost {s['lost']:,}   "
        f"duplicates {s['duplicates']:,}   drain {s['drain_seconds']} s",
        transform=top.transAxes, va="top", fontsize=9,
        bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8},
    )
    lag_seconds = sorted(report.lag_by_second)
    p50 = [percentile(sorted(report.lag_by_second[x]), 0.5) for x in lag_seconds]
    p99 = [percentile(sorted(report.lag_by_second[x]), 0.99) for x in lag_seconds]
    bottom.plot(lag_seconds, p50, marker=".", label="p50")
    bottom.plot(lag_seconds, p99, marker=".", label="p99")
    bottom.set_ylabel("fire lag of acks in that second (s)")
    bottom.set_xlabel("seconds since the first instant")
    bottom.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
