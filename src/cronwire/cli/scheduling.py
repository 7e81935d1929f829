"""Tenant commands for the scheduling semantics: the schedule flags `--overlap-policy
--jitter-seconds --at --max-runs --pause-after-failures`, `schedules pause ID --note`,
`schedules backfill`, and `runs replay` (one failed run, or the dead letters in bulk).

Like the rest of the tenant CLI these only build request bodies from flags named after the
API's fields and print the answer; the API decides (an API refusal prints its message and
exits 1; what the CLI can check itself is a usage error, exit 2, before any request).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from cronwire.cli.api_client import ApiClient, Handler, client_command, id_argument, uuid_flag
from cronwire.cli.output import Column, field, render_fields, render_table, show
from cronwire.domain.backfill import FIRST_SHOWN, MAX_BACKFILL
from cronwire.domain.errors import ConfigError
from cronwire.domain.jitter import MAX_JITTER_SECONDS
from cronwire.domain.replay import DEFAULT_REPLAY, MAX_REPLAY
from cronwire.domain.schedule_rules import MAX_PAUSE_AFTER_FAILURES, MAX_RUNS, OVERLAP_POLICIES

INSTANT_COLUMNS = [Column("OCCURRENCE (UTC)", field("utc"))]


def add_semantics_flags(parser: argparse.ArgumentParser, *, creating: bool) -> None:
    """The schedule fields of the scheduling semantics, as flags (update: absent = kept)."""
    keep = "" if creating else " (default: unchanged)"
    parser.add_argument("--rrule", metavar="RULE",
                        help="an RFC 5545 rule instead of --cron: 'RRULE:...' with optional "
                        "DTSTART/EXDATE/RDATE lines (newlines, or ' | ' between lines), "
                        "read in --timezone" + ("" if creating else "; replaces cron or at"))
    parser.add_argument("--at", metavar="TIME",
                        help="RFC 3339: a one-time schedule firing once at TIME, instead of "
                        "--cron" + ("" if creating else "; makes it one-time"))
    parser.add_argument("--overlap-policy", choices=OVERLAP_POLICIES,
                        help="what an occurrence does while the previous run is still "
                        "running: allow, skip, buffer_one, buffer_all, cancel_other"
                        + (" (default: allow)" if creating else keep))
    parser.add_argument("--jitter-seconds", type=int, metavar="SECONDS",
                        help=f"deliver each occurrence up to this late (0..{MAX_JITTER_SECONDS}, "
                        "the same offset on every replica)"
                        + (" (default: 0)" if creating else keep))
    parser.add_argument("--max-runs", type=int, metavar="N",
                        help=f"completed after N scheduled occurrences (1..{MAX_RUNS:,})"
                        + (" (default: no limit)" if creating else keep))
    parser.add_argument("--pause-after-failures", type=int, metavar="N",
                        help=f"pause itself after N consecutive failed runs "
                        f"(1..{MAX_PAUSE_AFTER_FAILURES})"
                        + (" (default: never)" if creating else keep))
    if not creating:
        parser.add_argument("--no-max-runs", action="store_true", help="remove the max_runs limit")
        parser.add_argument("--no-pause-after-failures", action="store_true",
                            help="never pause itself after failures")


def semantics_fields(args: argparse.Namespace, *, creating: bool) -> dict[str, Any]:
    """The API fields the flags set. On update, --cron, --rrule and --at each clear the
    others (a schedule has exactly one of them)."""
    timetables = [flag for flag in ("cron", "rrule", "at") if getattr(args, flag) is not None]
    if len(timetables) > 1 or (creating and not timetables):
        raise ConfigError("schedules " + ("create" if creating else "update") + ": give "
                          "--cron EXPR, --rrule RULE, or --at TIME for a one-time schedule "
                          "(exactly one of them)")
    rule = None if args.rrule is None else "\n".join(
        line.strip() for line in args.rrule.replace("\\n", "\n").replace(" | ", "\n").split("\n"))
    given = {"at": args.at, "rrule": rule, "overlap_policy": args.overlap_policy,
             "jitter_seconds": args.jitter_seconds, "max_runs": args.max_runs,
             "pause_after_failures": args.pause_after_failures}
    fields = {name: value for name, value in given.items() if value is not None}
    if not creating:
        for chosen in timetables:  # a schedule has exactly one: the flag clears the others
            fields.update({other: None for other in ("cron", "rrule", "at") if other != chosen})
        for name in ("max_runs", "pause_after_failures"):
            if getattr(args, f"no_{name}"):
                if name in fields:
                    raise ConfigError(f"--{name.replace('_', '-')}: not with "
                                      f"--no-{name.replace('_', '-')}")
                fields[name] = None
    return fields


def schedules_pause(client: ApiClient, args: argparse.Namespace) -> None:
    body = {"note": args.note} if args.note is not None else None
    show(args, client.call("POST", f"/v1/schedules/{args.id}/pause", body=body), render_fields)


def resume_warning(answer: Mapping[str, Any]) -> str | None:
    """The line that says a resume delivers missed runs at once (None when it makes at most
    one run due: nothing to warn about)."""
    due = int(answer.get("runs_due") or 0)
    if due <= 1:
        return None
    verb = "would make" if answer.get("dry_run") else "makes"
    return (f"cronwire: resuming {verb} {due:,} runs due at once (misfire_policy "
            f"{answer['misfire_policy']}, catch-up window {answer['catchup_window_seconds']} s)")


def schedules_resume(client: ApiClient, args: argparse.Namespace) -> None:
    body = {"dry_run": True} if args.dry_run else None
    answer = client.call("POST", f"/v1/schedules/{args.id}/resume", body=body)
    warning = resume_warning(answer)
    if warning is not None:
        print(warning, file=sys.stderr)  # stdout stays the answer, for pipes
    show(args, answer, render_fields)


def schedules_backfill(client: ApiClient, args: argparse.Namespace) -> None:
    body: dict[str, Any] = {"start": args.start, "end": args.end, "dry_run": args.dry_run}
    if args.overlap_policy is not None:
        body["overlap_policy"] = args.overlap_policy
    result = client.call("POST", f"/v1/schedules/{args.id}/backfill", body=body)

    def render(answer: Mapping[str, Any]) -> str:
        if args.dry_run:
            verb, count = "would create", answer["occurrences"] - answer["existing"]
        else:
            verb, count = "created", answer["created"]
        head = (f"{answer['occurrences']:,} occurrences in [start, end): {verb} {count:,} "
                f"runs; {answer['existing']:,} already had one")
        first = answer.get("first") or []
        table = render_table([{"utc": at} for at in first], INSTANT_COLUMNS) if first else ""
        more = "" if len(first) >= answer["occurrences"] else (
            f"\n(the first {len(first)} of {answer['occurrences']:,} shown)")
        return head + ("\n\n" + table if table else "") + more

    show(args, result, render)


def runs_replay(client: ApiClient, args: argparse.Namespace) -> None:
    if args.id is not None:
        if any(v is not None for v in (args.status, args.schedule_id, args.since, args.until,
                                       args.limit)):
            raise ConfigError("runs replay: give a RUN_ID, or --status failed with filters, "
                              "not both")
        show(args, client.call("POST", f"/v1/runs/{args.id}/replay"), render_fields)
        return
    if args.status != "failed":
        raise ConfigError("runs replay: give a RUN_ID, or --status failed to replay the dead "
                          "letters (failed runs)")
    body = {"status": "failed", "schedule_id": args.schedule_id, "since": args.since,
            "until": args.until, "limit": args.limit}
    answer = client.call("POST", "/v1/runs/replay",
                         body={k: v for k, v in body.items() if v is not None})
    show(args, answer, lambda a: f"replayed {a['replayed']:,} failed runs" + (
        "\n" + "\n".join(a["runs"]) if a["runs"] else ""))


def add_schedule_actions(action: Any) -> None:
    """`schedules pause ID [--note]`, `schedules resume ID [--dry-run]` and
    `schedules backfill`; ``action`` is cli_client's
    factory of `schedules` subcommands."""
    pause: argparse.ArgumentParser = action(
        "pause", "pause a schedule: no new runs are planned; --note says why",
        schedules_pause)
    id_argument(pause, "schedule")
    pause.add_argument("--note", metavar="TEXT",
                       help="kept as the schedule's paused_reason (1..1000 characters)")
    resume: argparse.ArgumentParser = action(
        "resume", "resume a schedule; missed occurrences follow its misfire policy (fire_all "
        "delivers every one within the catch-up window at once: a line on stderr says how "
        "many); --dry-run only counts them", schedules_resume)
    id_argument(resume, "schedule")
    resume.add_argument("--dry-run", action="store_true",
                        help="change nothing: print how many runs a resume would make due")
    backfill: argparse.ArgumentParser = action(
        "backfill", f"runs for the occurrences of [--start, --end) that have none (at most "
        f"{MAX_BACKFILL:,}); --dry-run counts and lists them", schedules_backfill)
    id_argument(backfill, "schedule")
    backfill.add_argument("--start", required=True, metavar="TIME", help="RFC 3339, inclusive")
    backfill.add_argument("--end", required=True, metavar="TIME",
                          help="RFC 3339, exclusive, not later than now")
    backfill.add_argument("--overlap-policy", choices=OVERLAP_POLICIES,
                          help="for the backfill's runs (default: the schedule's)")
    backfill.add_argument("--dry-run", action="store_true",
                          help=f"write nothing: count, and show the first {FIRST_SHOWN}")


def add_replay_command(run_actions: Any, api: argparse.ArgumentParser) -> None:
    """`runs replay RUN_ID` and `runs replay --status failed [...]`."""
    replay: argparse.ArgumentParser = run_actions.add_parser(
        "replay", parents=[api], help="replay a failed run, or the dead letters in bulk",
        description="Replay a failed run (RUN_ID), or with --status failed the failed runs "
        "not yet replayed, oldest first. A replay is a new run due now with a new "
        "webhook-id; it carries the original occurrence.")
    handler: Handler = runs_replay
    replay.set_defaults(handler=client_command(handler))
    replay.add_argument("id", metavar="RUN_ID", type=uuid_flag, nargs="?",
                        help="the failed run to replay")
    replay.add_argument("--status", choices=["failed"],
                        help="replay the dead letters: failed runs (the only choice)")
    replay.add_argument("--schedule-id", type=uuid_flag, metavar="ID",
                        help="only this schedule's failed runs")
    replay.add_argument("--since", metavar="TIME", help="RFC 3339; scheduled_for at or after it")
    replay.add_argument("--until", metavar="TIME", help="RFC 3339; scheduled_for before it")
    replay.add_argument("--limit", type=int, metavar="N",
                        help=f"at most N (1..{MAX_REPLAY:,}; default {DEFAULT_REPLAY})")


def timetable(schedule: Mapping[str, Any]) -> str:
    """The CRON column: the cron expression, the rule's RRULE line, or a one-time
    schedule's instant."""
    cron, rule = schedule.get("cron"), schedule.get("rrule")
    if cron is not None:
        return str(cron)
    if rule is not None:
        return next((line for line in str(rule).split("\n") if line.startswith("RRULE:")),
                    str(rule))
    return f"at {schedule.get('at')}"


def run_status(run: Mapping[str, Any]) -> str:
    """The STATUS column: a skipped run says why."""
    reason = run.get("skip_reason")
    return f"{run.get('status')} ({reason})" if reason else str(run.get("status"))

