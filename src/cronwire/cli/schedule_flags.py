"""The `schedules create|update` flags, named after the API's fields (on update, a flag
left out leaves its field unchanged), and the create command's examples."""

from __future__ import annotations

import argparse

from cronwire.cli.api_client import (
    DEFAULT_URL,
    ENV_TOKEN,
    ENV_URL,
)
from cronwire.cli.calendars import add_calendar_flags
from cronwire.cli.client_tls import add_tls_flags
from cronwire.cli.flow_control import add_flow_flags
from cronwire.cli.observability import (
    add_alert_rule_flags,
)
from cronwire.cli.scheduling import (
    add_semantics_flags,
)
from cronwire.domain.model import METHODS, MisfirePolicy

MISFIRE_POLICIES = tuple(policy.value for policy in MisfirePolicy)


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME:VALUE, got {text!r}")
    return name.strip(), value.strip()


CREATE_EXAMPLES = f"""\
examples:
  export {ENV_TOKEN}=cwt_...            # from `cronwire tenant create acme`
  cronwire schedules create --name nightly-report --cron '0 3 * * *' \\
      --timezone Europe/Berlin --url https://example.com/hook
  cronwire schedules create --name every-10s --cron '*/10 * * * * *' \\
      --url https://example.com/tick --method PUT --header 'x-team:ops' \\
      --body '{{"k": 1}}' --max-attempts 5 --misfire-policy skip --paused

Here --url is the target's URL (the API's `target.url` field); the API's address
comes from --api-url or ${ENV_URL} (default {DEFAULT_URL}).
"""


def schedule_flags(parser: argparse.ArgumentParser, *, creating: bool) -> None:
    """Flags named after the API's fields; on update, absent means unchanged."""
    keep = " (default: unchanged)"

    def default(text: str) -> str:
        return f" (default: {text})" if creating else keep

    parser.add_argument("--name", required=creating, help="schedule name, 1..200 characters"
                        + ("" if creating else keep))
    parser.add_argument("--cron", metavar="EXPR",
                        help="5 fields, or 6 with seconds first ('*/10 * * * * *')"
                        + ("; or --at for a one-time schedule" if creating
                           else "; makes a one-time schedule a cron one" + keep))
    parser.add_argument("--url", required=creating, metavar="URL",
                        help="target.url: where each run is delivered"
                        + ("" if creating else keep))
    parser.add_argument("--timezone", metavar="ZONE",
                        help="IANA time zone the cron is read in" + default("UTC"))
    parser.add_argument("--method", type=str.upper, choices=METHODS,
                        help="target.method" + default("POST"))
    parser.add_argument("--header", type=_header, action="append", metavar="NAME:VALUE",
                        help="target.headers entry, repeatable"
                        + (" (default: none)" if creating else "; replaces all (NAME:*** keeps one)"))
    parser.add_argument("--body", metavar="TEXT",
                        help="target.body" + default(
                            'none: a JSON {"schedule_id", "run_id", "scheduled_for", '
                            '"attempt"} is sent'))
    parser.add_argument("--max-attempts", type=int, metavar="N",
                        help="retry.max_attempts, 1..8" + default("3"))
    parser.add_argument("--initial-backoff-seconds", type=float, metavar="SECONDS",
                        help="retry.initial_backoff_seconds" + default("10"))
    parser.add_argument("--max-backoff-seconds", type=float, metavar="SECONDS",
                        help="retry.max_backoff_seconds" + default("3600"))
    parser.add_argument("--misfire-policy", choices=MISFIRE_POLICIES,
                        help="what to do with occurrences missed while nothing ran"
                        + default("fire_all"))
    parser.add_argument("--catchup-window-seconds", type=int, metavar="SECONDS",
                        help="how far back fire_all replays missed occurrences"
                        + default("3600"))
    parser.add_argument("--starts-at", metavar="TIME",
                        help="RFC 3339, no fires before it" + default("none"))
    parser.add_argument("--ends-at", metavar="TIME",
                        help="RFC 3339, no fires after it" + default("none"))
    add_tls_flags(parser, creating=creating)
    add_semantics_flags(parser, creating=creating)
    add_alert_rule_flags(parser)
    add_flow_flags(parser, creating=creating)
    add_calendar_flags(parser, creating=creating)
    if creating:
        parser.add_argument("--paused", action="store_true",
                            help="create it paused (default: active)")
    else:
        parser.add_argument("--no-headers", action="store_true",
                            help="remove every target header")
        parser.add_argument("--no-body", action="store_true",
                            help="send the default JSON body instead of target.body")
