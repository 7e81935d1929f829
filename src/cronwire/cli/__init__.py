"""The `cronwire` command: the parser and entry point (main.py); the operator commands
on the database (operator.py, with database.py's rules for which database); the tenant
commands over the API (schedules.py, runs.py, api_client.py, output.py); the harnesses'
flags (harness_flags.py)."""
