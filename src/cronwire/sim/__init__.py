"""Deterministic simulation (``cronwire sim``, ADR 0062): the real planner and executor of
several replicas over the memory adapters, on a virtual-time event loop, with faults
drawn from a seed and the guarantees checked after every step."""
