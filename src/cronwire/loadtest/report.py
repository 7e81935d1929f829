"""Load-test accounting from the receiver's side, and the chart."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from cronwire.harness.stats import percentile


@dataclass(frozen=True, slots=True)
class Baselines:
    """What --compare measured in the same invocation (runs/s)."""

    bound_db: float
    bound_http: float
    ceiling: float  # 1 / (1/bound_db + 1/bound_http)
    pgqueuer: float


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
    deliveries: Path, drain_seconds: float, baselines: Baselines | None = None,
) -> Report:
    """``planned`` maps each occurrence's webhook-id to its instant. Every sink record is a
    2xx acknowledgement; a second one for the same id is a duplicate. Throughput is
    delivered / seconds from the first instant to the last acknowledgement."""
    acked: dict[str, float] = {}
    duplicates = 0
    lines = deliveries.read_text(encoding="utf-8").splitlines() if deliveries.exists() else []
    for line in lines:
        record = json.loads(line)
        if record["id"] in acked:
            duplicates += 1
        else:
            acked[record["id"]] = float(record["at"])
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
        summary.update({
            "ceiling_runs_per_second": round(baselines.ceiling, 1),
            "pgqueuer_runs_per_second": round(baselines.pgqueuer, 1),
            "ratio_to_ceiling": _ratio(runs_per_second, baselines.ceiling),
            "ratio_to_pgqueuer": _ratio(runs_per_second, baselines.pgqueuer),
        })
    return Report(summary, dict(per_second), lag_by_second, baselines)


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
                    label=f"bound: claim+write and bare HTTP ({report.baselines.ceiling:,.0f}/s)")
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
