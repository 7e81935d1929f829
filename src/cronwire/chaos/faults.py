"""The fault catalogue: each fault's driver, verdict and set-up, by the name `cronwire
chaos --faults` takes, and the faults each mode runs by default. The drivers live in
process_faults.py, server_faults.py, timing_faults.py and lease_cut.py."""

from __future__ import annotations

from cronwire.chaos.failover import (
    async_failover_verdict,
    fail_over,
    fail_over_lagging,
    failover_verdict,
    observe_failover,
    summarize_failover,
)
from cronwire.chaos.lease_cut import (
    cut_lease_renewal,
    lease_cut_tested_nothing,
    lease_cut_verdict,
    observe_lease_cut,
    summarize_lease_cut,
)
from cronwire.chaos.process_faults import (
    kill_replicas,
    observe_stall,
    rolling_restarts,
    stall_owner,
    stall_verdict,
)
from cronwire.chaos.report import no_duplicates_no_exits
from cronwire.chaos.scenario import FaultSpec
from cronwire.chaos.server_faults import (
    cut_connections,
    restart_broker,
    restart_postgres,
    stall_broker,
)
from cronwire.chaos.timing_faults import (
    fairness_too_small,
    fairness_verdict,
    just_fire,
    observe_skew,
    skew_verdict,
    skewed_env,
    summarize_fairness,
    summarize_skew,
)

FAULTS: dict[str, FaultSpec] = {
    "kill": FaultSpec(kill_replicas, sink_delay_ms=300,
                      about="kill -9 a random replica every 2-4 s and restart it"),
    "stall": FaultSpec(stall_owner, verdict=stall_verdict, observe=observe_stall,
                       delivery_timeout=1.5, sink_delay_ms=300,
                       about="SIGSTOP a replica holding leases for 1.5 x its lease, then SIGCONT"),
    "pg-restart": FaultSpec(restart_postgres, verdict=no_duplicates_no_exits,
                            delivery_timeout=5.0, sink_delay_ms=50, needs_own_postgres=True,
                            about="pg_ctl stop -m fast / start, twice"),
    "connection-cuts": FaultSpec(cut_connections, verdict=no_duplicates_no_exits,
                                 delivery_timeout=5.0, sink_delay_ms=50, proxy=True,
                                 about="a TCP proxy drops, resets and stalls database connections"),
    "lease-cut": FaultSpec(cut_lease_renewal, verdict=lease_cut_verdict,
                           observe=observe_lease_cut, summarize=summarize_lease_cut,
                           inconclusive=lease_cut_tested_nothing,
                           delivery_timeout=1.5, sink_delay_ms=300, victim_proxy=True,
                           # In kafka mode the cut-off replica often held no partition in
                           # reduced runs (the group kept rebalancing): nothing to cut off.
                           modes=("postgres",),
                           about="one replica's database path blackholed for 2 x its lease "
                                 "while its HTTP path works"),
    # Few workers and a slightly slow receiver: a claim takes only part of each second's
    # runs, so every replica, the skewed ones too, delivers some (with 64 workers the first
    # replica awake took all of them, and a skewed one could lose every race).
    "clock-skew": FaultSpec(just_fire, verdict=skew_verdict, observe=observe_skew,
                            summarize=summarize_skew, replica_env=skewed_env,
                            workers=8, sink_delay_ms=20,
                            about="replica clocks +30 s and -30 s"),
    "fairness": FaultSpec(just_fire, verdict=fairness_verdict, summarize=summarize_fairness,
                          burst=True, burst_delay_ms=100, workers=32, delivery_timeout=5.0,
                          too_small=fairness_too_small,
                          about="one tenant's burst due at once, nine tenants firing every second"),
    "rolling-restart": FaultSpec(rolling_restarts, verdict=no_duplicates_no_exits,
                                 sink_delay_ms=50,
                                 about="SIGTERM and restart one replica after another"),
    # A lease of 10 s: the failover (kill, 2 s to decide, promotion) fits inside it.
    "failover": FaultSpec(fail_over, verdict=failover_verdict, summarize=summarize_failover,
                          observe=observe_failover, delivery_timeout=5.0, sink_delay_ms=300, pair="sync",
                          needs_own_postgres=True,
                          about="kill -9 the primary's postmaster, promote its synchronous "
                                "standby"),
    "failover-async": FaultSpec(fail_over_lagging, verdict=async_failover_verdict,
                                summarize=summarize_failover, observe=observe_failover,
                                delivery_timeout=5.0,
                                sink_delay_ms=300, pair="async", needs_own_postgres=True,
                                about="the same with an asynchronous standby held 1.5 s "
                                      "behind (what it had not received is lost)"),
    "broker-kill": FaultSpec(restart_broker, sink_delay_ms=50, modes=("kafka",),
                             about="kill and restart the broker (its memory is lost), twice"),
    "broker-stall": FaultSpec(stall_broker, sink_delay_ms=50, modes=("kafka",),
                              about="SIGSTOP the broker beyond the consumer session timeout"),
}

DEFAULT_FAULTS = {
    "postgres": ("kill", "stall", "pg-restart", "connection-cuts", "lease-cut", "clock-skew",
                 "fairness", "failover", "failover-async"),
    "kafka": ("kill", "stall", "broker-kill", "broker-stall", "rolling-restart", "fairness",
              "failover"),
}
