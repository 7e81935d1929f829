"""The composition root: the only code that knows concrete adapters. container.py wires a
serving replica (dependency-injector) and runtime.py resolves it into plain objects and
the loops of its roles; replica.py runs one replica's lifecycle; embedded.py starts the
embedded servers; factories.py holds the small typed factories of every other entry
point (the CLI's commands, the harnesses); executor.py assembles the executor from its
settings, for the container and for every other caller (the simulator, tests, benchmarks)."""
