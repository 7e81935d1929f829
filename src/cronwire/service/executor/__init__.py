"""Stage 2, the executor: the claim loop (claim_loop.py), the lease keeper, the resolution
writer, the breaker gate, the deliveries, the shutdown drain, and kafka mode's hybrid claim
source. bootstrap/executor.py assembles them from an :class:`ExecutorSettings`."""

from cronwire.service.executor.claim_loop import Executor
from cronwire.service.executor.settings import ExecutorSettings

__all__ = ["Executor", "ExecutorSettings"]
