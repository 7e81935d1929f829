"""The harness toolkit shared by `cronwire loadtest`, `cronwire chaos` and the tests:
replica fleets (fleet.py), the webhook sink (sink.py), seeding (seeding.py) and the
figures (stats.py)."""
