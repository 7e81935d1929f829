"""Load-test accounting from the receiver's side, and the chart."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


@dataclass
class Report:
    summary: dict[str, object]
    per_second: dict[int, int] = field(default_factory=dict)  # second -> first acks
    lag_by_second: dict[int, list[float]] = field(default_factory=dict)  # occurrence second -> lags


def _percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def build_report(
    mode: str, schedules: int, replicas: int, planned: dict[str, datetime],
    deliveries: Path, drain_seconds: float,
) -> Report:
    """``planned`` maps each occurrence's webhook-id to its instant. Every sink record is a
    2xx acknowledgement; a second one for the same id is a duplicate."""
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
        per_second[int(at - first_instant)] += 1
        lag_by_second.setdefault(int(instant.timestamp() - first_instant), []).append(lag)
    lags.sort()
    delivered = len(lags)
    elapsed = max(last_ack - first_instant, 1e-9)
    summary: dict[str, object] = {
        "mode": mode,
        "schedules": schedules,
        "replicas": replicas,
        "planned": len(planned),
        "delivered": delivered,
        "duplicates": duplicates,
        "lost": len(planned) - delivered,
        "runs_per_second": round(delivered / elapsed, 1) if delivered else 0.0,
        "fire_lag_p50_ms": round(_percentile(lags, 0.50) * 1000, 1),
        "fire_lag_p95_ms": round(_percentile(lags, 0.95) * 1000, 1),
        "fire_lag_p99_ms": round(_percentile(lags, 0.99) * 1000, 1),
        "drain_seconds": round(drain_seconds, 2),
    }
    return Report(summary, dict(per_second), lag_by_second)


def write_chart(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    seconds = sorted(report.per_second)
    top.bar(seconds, [report.per_second[s] for s in seconds], width=1.0, color="#3b7dd8")
    top.set_ylabel("deliveries acknowledged / s")
    top.set_title(
        f"cronwire loadtest: {report.summary['mode']} mode, {report.summary['schedules']} schedules, "
        f"{report.summary['replicas']} replicas"
    )
    lag_seconds = sorted(report.lag_by_second)
    p50 = [_percentile(sorted(report.lag_by_second[s]), 0.5) * 1000 for s in lag_seconds]
    p99 = [_percentile(sorted(report.lag_by_second[s]), 0.99) * 1000 for s in lag_seconds]
    bottom.plot(lag_seconds, p50, marker="o", label="p50")
    bottom.plot(lag_seconds, p99, marker="o", label="p99")
    bottom.set_ylabel("fire lag (ms)")
    bottom.set_xlabel("seconds since the first occurrence")
    bottom.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
