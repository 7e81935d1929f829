"""Stage 2, the executor: the claim loop (claim_loop.py), the lease keeper, the resolution
writer, the breaker gate, the shutdown drain, and kafka mode's hybrid claim source."""

from cronwire.service.executor.claim_loop import Executor

__all__ = ["Executor"]
