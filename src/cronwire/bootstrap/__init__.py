"""The composition root: the only code that knows concrete adapters. container.py wires a
serving replica (dependency-injector); factories.py holds the small typed factories of
every other entry point (the CLI's commands, the harnesses); replica.py runs one
replica's lifecycle."""
