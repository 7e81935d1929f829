"""The HTTP side of the tenant commands: one client of the /v1 API, its connection flags
(--api-url/CRONWIRE_URL, --token/CRONWIRE_TOKEN, --json, --timeout) and the error lines.

An API refusal becomes :class:`ApiFailure` carrying the API's own message (it names the
field); cli/main.py prints it and exits 1. Missing or malformed connection settings are a
ConfigError: one line, exit 2, before any request.
"""

from __future__ import annotations

import argparse
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cronwire.cli.interrupts import interrupted
from cronwire.domain.errors import ConfigError, CronwireError
from cronwire.version import version

if TYPE_CHECKING:
    import httpx

# httpx is imported where a request is made, not at module level: it costs more than the
# rest of the CLI's start-up together, and `--help` or `--version` never sends anything
# (benchmarks/bench_cli_startup.py).

ENV_URL = "CRONWIRE_URL"
ENV_TOKEN = "CRONWIRE_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8080"
# The help every tenant command group ends with.
GROUP_HELP = (f"API at --api-url/${ENV_URL} (default {DEFAULT_URL}), token from "
              f"--token/${ENV_TOKEN}; a table on a terminal, JSON with --json or when "
              "piped; an API refusal prints its message and exits 1")
EXIT_INTERRUPTED = 130

Handler = Callable[["ApiClient", argparse.Namespace], Any]


class ApiFailure(CronwireError):
    """The API refused or could not be reached; the CLI prints the message and exits 1.
    ``retry_after``: the seconds a 503 (a dependency outage) asked to wait, else None."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ApiClient:
    def __init__(self, base_url: str, token: str, timeout: float) -> None:
        import httpx

        self.base_url = base_url
        self._http = httpx.Client(
            base_url=base_url, timeout=timeout,
            headers={"Authorization": f"Bearer {token}",
                     "User-Agent": f"cronwire-cli/{version()}"},
        )

    def close(self) -> None:
        self._http.close()

    def call(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             body: Mapping[str, Any] | None = None,
             headers: Mapping[str, str] | None = None) -> Any:
        import httpx

        if interrupted():  # Ctrl-C came, and a finalizer dropped its KeyboardInterrupt
            raise KeyboardInterrupt
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(method, path, params=query, json=body,
                                          headers=headers)
        except httpx.ConnectError as exc:
            raise ApiFailure(
                f"cannot reach the API at {self.base_url} ({_reason(exc)}); is `cronwire "
                f"serve` running there? Set --api-url or {ENV_URL}"
            ) from None
        except httpx.TimeoutException:
            raise ApiFailure(f"the API at {self.base_url} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise ApiFailure(f"request to {self.base_url} failed: {_reason(exc)}") from None
        if response.status_code >= 400:
            raise ApiFailure(_error_message(response), _retry_after(response))
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ApiFailure(f"{method} {path}: the answer is not JSON "
                             f"(HTTP {response.status_code}); is {self.base_url} cronwire?"
                             ) from None


def pages(client: ApiClient, path: str, params: Mapping[str, Any],
          every: bool) -> dict[str, Any]:
    """One page of a list route, or with ``every`` (``--all``) the items of that page and
    of every page after it, in order; ``next_cursor`` is the last page's (None at the end)."""
    page = client.call("GET", path, params=params)
    items = list(page["items"])
    while every and page.get("next_cursor"):
        page = client.call("GET", path, params={**params, "cursor": page["next_cursor"]})
        items += page["items"]
    return {"items": items, "next_cursor": page.get("next_cursor")}


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    if "refused" in text.lower():
        return "connection refused"
    return text.splitlines()[-1] if text else type(exc).__name__


def _retry_after(response: httpx.Response) -> float | None:
    """A 503's Retry-After in seconds (1 when absent or not a number of seconds)."""
    if response.status_code != 503:
        return None
    try:
        return max(0.0, float(response.headers.get("Retry-After", "1")))
    except ValueError:
        return 1.0


def _error_message(response: httpx.Response) -> str:
    """The API's message, which starts with the field or limit at fault."""
    try:
        detail = response.json()["error"]
        message = str(detail["message"])
    except (ValueError, KeyError, TypeError):
        first = " ".join(response.text.split())[:200]
        return f"HTTP {response.status_code} from {response.request.url}: {first or 'no body'}"
    if response.status_code == 404 and message == "Not Found":  # the route, not an object
        message = (f"{response.request.url.path}: no such route at {response.request.url.host}"
                   f":{response.request.url.port}; does that replica run the api role?")
    if response.status_code == 401:
        message += (f" (check --token/${ENV_TOKEN}; a token works only with the database "
                    "it was made in)")
    if response.status_code == 503:
        message += f" (HTTP 503, retry after {response.headers.get('Retry-After', '1')}s)"
    return message


def seconds_flag(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be between 0.1 and 3600, got {text}")
    return value


def connection_options(url_is_api: bool) -> argparse.ArgumentParser:
    """--api-url (also --url, except where --url is the target's), --token, --json."""
    common = argparse.ArgumentParser(add_help=False)
    names = ["--api-url", "--url"] if url_is_api else ["--api-url"]
    common.add_argument(*names, dest="api_url", metavar="URL",
                        help=f"the cronwire API (default: ${ENV_URL}, else {DEFAULT_URL})")
    common.add_argument("--token", metavar="TOKEN",
                        help=f"API token from `cronwire tenant create` (default: ${ENV_TOKEN}; "
                        "prefer the variable, a flag shows in the process list)")
    common.add_argument("--json", action="store_true",
                        help="print the API's JSON (the default when stdout is not a terminal)")
    common.add_argument("--timeout", type=seconds_flag, default=30.0, metavar="SECONDS",
                        help="how long to wait for each answer (default: 30)")
    return common


def client_for(args: argparse.Namespace) -> ApiClient:
    import httpx

    url = (args.api_url or os.environ.get(ENV_URL) or DEFAULT_URL).rstrip("/")
    try:
        parts = httpx.URL(url) if "://" in url else None
    except httpx.InvalidURL:
        parts = None
    if parts is None or parts.scheme not in {"http", "https"} or not parts.host:
        raise ConfigError(f"--api-url: expected an http(s) URL, got {url!r}")
    token = args.token or os.environ.get(ENV_TOKEN)
    if not token:
        raise ConfigError(f"--token: no API token; pass --token or set {ENV_TOKEN} "
                          "(`cronwire tenant create NAME` prints one)")
    return ApiClient(url, token, args.timeout)


def client_command(handler: Handler) -> Callable[[object, argparse.Namespace], int]:
    """A cli/main.py handler: builds the client, maps Ctrl-C to a quiet exit."""

    def run(_settings: object, args: argparse.Namespace) -> int:
        # httpx logs every request at INFO; the CLI's stderr is for the user's errors.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        client = client_for(args)
        try:
            result = handler(client, args)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        finally:
            client.close()
        return result if isinstance(result, int) else 0  # plan: its own exit status

    return run


def uuid_flag(text: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a UUID: {text!r}") from None


def id_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("id", metavar="ID", type=uuid_flag, help=f"the {what}'s id")
