"""A replica imports only what its roles and claim mode use (docs/operating.md#start-up).

Each ``cronwire serve`` pays for its imports in CPU at every start (an autoscaled fleet, a
restarted pod, every replica a chaos run starts). The tenant API's routes and models, the
Kafka client, httpx and cryptography's X.509 parsers are imported when first needed, not
by every replica, and nor are FastAPI and pydantic, which only the api role serves: this
checks it in a fresh interpreter, as a replica starts. (Where they
are used, the tests of the API, of kafka mode, of the httpx deliverer and of client
certificates import them through the same lazy paths.)
"""

from __future__ import annotations

import json
import subprocess
import sys

# What a replica imports before it reads its settings: the CLI, then the serve path.
SERVE_PATH = "import cronwire.cli.main, cronwire.bootstrap.replica"
OPTIONAL = ("aiokafka", "httpx", "cryptography.x509", "cronwire.api.routes_schedules",
            "cronwire.api.routes_runs", "cronwire.api.schemas", "cronwire.adapters.kafka.link",
            # only the api role serves FastAPI's application; dependency-injector is loaded
            # without its integrations (bootstrap/container.py)
            "fastapi", "starlette", "pydantic", "pydantic_settings", "werkzeug")


def loaded_after(statement: str) -> set[str]:
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    return set(json.loads(done.stdout))


def test_the_serve_path_leaves_the_optional_libraries_and_the_tenant_api_unimported() -> None:
    loaded = loaded_after(SERVE_PATH)
    assert "cronwire.bootstrap.container" in loaded  # the path really was imported
    assert not loaded & set(OPTIONAL), sorted(loaded & set(OPTIONAL))


def test_dependency_injector_still_works_and_the_hidden_packages_import_afterwards() -> None:
    """Hiding is for the library's own import only: the API imports FastAPI as usual."""
    loaded = loaded_after("import cronwire.bootstrap.container, fastapi, pydantic, yaml\n"
                          "from cronwire.bootstrap.container import Container\n"
                          "assert Container.metrics() is Container.metrics()")
    assert {"fastapi", "pydantic", "yaml", "dependency_injector"} <= loaded
