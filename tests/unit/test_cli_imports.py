"""What `cronwire` imports before it knows the command (every call once took
1–3 s, `--version` too). The time itself is a benchmark (benchmarks/bench_cli_startup.py);
this keeps the heavy libraries out of the path every command pays for, where an import
added at a module's top would slip them back in unnoticed."""

from __future__ import annotations

import json
import subprocess
import sys

# Each costs 50–500 ms to import; only the commands that use them import them.
HEAVY = ("asyncio", "asyncpg", "httpx", "fastapi", "uvicorn", "aiokafka", "hypothesis",
         "cronwire.bootstrap.factories", "cronwire.adapters.postgres.pool")


def test_the_cli_imports_no_heavy_library_before_it_knows_the_command() -> None:
    probe = ("import json, sys\nimport cronwire.cli.main\n"
             f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
