"""`cronwire apply`, `plan` and `export` (schedules as code, ADR 0057), over the API's
`POST /v1/schedules/apply` and `GET /v1/schedules`; also `schedules get-key` and
`schedules delete-key`.

Exit statuses: 0 done (plan: no changes), 1 the API refused or failed, 2 a file or flag
is wrong (one line naming the file, the line and the field), and `plan` 3 when the apply
would change something (so CI can tell "nothing to do" from "changes to review").
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

import yaml

from cronwire.cli.api_client import ApiClient, ApiFailure, Handler, client_command, pages
from cronwire.cli.definitions import Definition, load_definitions
from cronwire.cli.output import print_json, render_fields, show, wants_json
from cronwire.domain.errors import ConfigError

EXIT_CHANGES = 3
_INDEXED = re.compile(r"^schedules\[(\d+)\]\.?([^:\s]*)")


def _located(failure: ApiFailure, definitions: list[Definition]) -> ConfigError | None:
    """An API refusal of definition i as the file and line it came from."""
    found = _INDEXED.match(str(failure))
    if found is None or int(found.group(1)) >= len(definitions):
        return None
    definition = definitions[int(found.group(1))]
    field = found.group(2)
    line = definition.line_of(field) if field else definition.line
    return ConfigError(f"{definition.file}:{line}: {failure}")


def _body(args: argparse.Namespace, definitions: list[Definition], dry_run: bool) -> dict[str, Any]:
    labels = {d.fields.get("managed_by") for d in definitions} - {None}
    managed_by = args.managed_by
    if managed_by is None and len(labels) == 1:
        managed_by = labels.pop()  # what the files (an export) say
    if args.prune and managed_by is None:
        raise ConfigError("--prune needs --managed-by NAME (or files that all say managed_by)")
    return {"schedules": [d.fields for d in definitions], "managed_by": managed_by,
            "prune": args.prune, "dry_run": dry_run}


def render_changes(answer: dict[str, Any]) -> str:
    lines = [f"+ {key}  (create)" for key in answer["created"]]
    for updated in answer["updated"]:
        lines.append(f"~ {updated['key']}")
        lines += [f"    {field}: {before!r} -> {after!r}"
                  for field, (before, after) in updated["changes"].items()]
    lines += [f"- {key}  (delete)" for key in answer["deleted"]]
    verb = "would change" if answer["dry_run"] else "changed"
    total = len(answer["created"]) + len(answer["updated"]) + len(answer["deleted"])
    lines.append(f"{total} {verb} ({len(answer['created'])} create, {len(answer['updated'])} "
                 f"update, {len(answer['deleted'])} delete), {answer['unchanged']} unchanged")
    return "\n".join(lines)


def _apply(client: ApiClient, args: argparse.Namespace, dry_run: bool) -> dict[str, Any]:
    definitions = load_definitions(args.file)
    try:
        answer: dict[str, Any] = client.call("POST", "/v1/schedules/apply",
                                             body=_body(args, definitions, dry_run))
    except ApiFailure as failure:
        raise _located(failure, definitions) or failure from None
    return answer


def apply_command(client: ApiClient, args: argparse.Namespace) -> int:
    answer = _apply(client, args, args.dry_run)
    if wants_json(args.json):
        print_json(answer)
    else:  # the secrets of new schedules only on request: CI logs keep output
        print(render_changes(answer))
    return 0


def plan_command(client: ApiClient, args: argparse.Namespace) -> int:
    args.dry_run = True
    answer = _apply(client, args, True)
    show(args, answer, render_changes)
    changed = answer["created"] or answer["updated"] or answer["deleted"]
    return EXIT_CHANGES if changed else 0


def placeholder(key: str, header: str) -> str:
    """The environment variable an exported header value is read from on apply."""
    stem = re.sub(r"[^A-Z0-9]+", "_", f"{key}_{header}".upper()).strip("_")
    return "${CRONWIRE_" + stem + "}"


def as_definition(schedule: dict[str, Any]) -> dict[str, Any]:
    """A schedule as GET shows it, as apply takes it: fields with a value, header values
    as ${...} placeholders (reads never show them)."""
    target = {k: v for k, v in schedule["target"].items() if v not in (None, {})}
    if schedule["target"]["headers"]:
        target["headers"] = {name: placeholder(schedule["key"], name)
                             for name in sorted(schedule["target"]["headers"])}
    fields = ["key", "managed_by", "name", "cron", "rrule", "at", "timezone", "retry",
              "misfire_policy", "catchup_window_seconds", "starts_at", "ends_at",
              "overlap_policy", "jitter_seconds", "max_runs", "pause_after_failures",
              "flow_control"]
    out = {name: schedule[name] for name in fields if schedule.get(name) is not None}
    out["target"] = target
    alerts = {k: v for k, v in (schedule.get("alerts") or {}).items() if v is not None}
    if alerts:
        out["alerts"] = alerts
    if schedule.get("exclude_calendars"):  # ids of this tenant's calendars
        out["exclude_calendars"] = schedule["exclude_calendars"]
        out["calendar_policy"] = schedule.get("calendar_policy", "skip")
    out["paused"] = schedule["status"] == "paused"
    return out


def export_command(client: ApiClient, args: argparse.Namespace) -> int:
    items = pages(client, "/v1/schedules", {"limit": 200}, True)["items"]
    chosen = [s for s in items if args.managed_by is None or s["managed_by"] == args.managed_by]
    keyless = sum(1 for s in chosen if s["key"] is None)
    definitions = sorted((as_definition(s) for s in chosen if s["key"] is not None),
                         key=lambda d: d["key"])
    print(yaml.safe_dump(definitions, sort_keys=False, allow_unicode=True), end="")
    if keyless:
        print(f"cronwire: {keyless} schedule(s) without a key left out (apply matches by "
              "key; give them one with PATCH or `schedules update`)", file=sys.stderr)
    return 0


def _by_key(method: str) -> Handler:
    def handler(client: ApiClient, args: argparse.Namespace) -> None:
        answer = client.call(method, f"/v1/schedules/by-key/{args.key}")
        show(args, answer or {"key": args.key, "deleted": True}, render_fields)

    return handler


def add_as_code_commands(commands: argparse._SubParsersAction[Any],
                         api: argparse.ArgumentParser) -> None:
    for name, handler, help_text in (
        ("apply", apply_command, "make the server's schedules match definition files"),
        ("plan", plan_command, "what apply would change, field by field (apply --dry-run); "
         f"exit 0 no changes, {EXIT_CHANGES} changes"),
    ):
        parser = commands.add_parser(name, help=help_text, parents=[api],
                                     description=help_text[0].upper() + help_text[1:] + ".")
        parser.add_argument("-f", "--file", action="append", required=True, metavar="PATH",
                            help="a YAML or JSON file (one schedule or a list) or a "
                            "directory of them; repeatable")
        parser.add_argument("--managed-by", metavar="NAME",
                            help="label every schedule with it (default: the files' own)")
        parser.add_argument("--prune", action="store_true", help="delete the schedules of "
                            "--managed-by that the files do not list")
        if name == "apply":
            parser.add_argument("--dry-run", action="store_true", help="write nothing")
        parser.set_defaults(handler=client_command(handler))
    export = commands.add_parser("export", parents=[api], help="print schedules as YAML that "
                                 "apply takes (header values as ${...} placeholders)")
    export.add_argument("--managed-by", metavar="NAME", help="only the schedules it manages")
    export.set_defaults(handler=client_command(export_command))


def add_key_actions(action: Any) -> None:
    """`schedules get-key KEY` and `schedules delete-key KEY`."""
    for name, method, text in (("get-key", "GET", "show the schedule with this key"),
                               ("delete-key", "DELETE", "delete the schedule with this key")):
        parser = action(name, text, _by_key(method))
        parser.add_argument("key", metavar="KEY", help="the schedule's key")
