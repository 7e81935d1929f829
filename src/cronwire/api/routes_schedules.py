"""`/v1/schedules`: create, read, list, edit, delete, pause, resume, trigger, preview and
rotate the signing secret. Handlers translate HTTP to domain and back and call one use
case of service/schedule_commands.py each, with the authenticated tenant id; the rules
are the domain's.
"""

# No "from __future__ import annotations": FastAPI must see the real types of the
# handlers' parameters, and the Tenant dependency alias is local to the factory.
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response, Security

from cronwire.api.auth import Caller, caller_dependency, request_authenticator
from cronwire.api.context import ApiContext
from cronwire.api.errors import responses
from cronwire.api.limits import capped_route
from cronwire.api.mapping import run_out, schedule_out, spec_from
from cronwire.api.merge_patch import patched_spec, url_changed
from cronwire.api.schemas import (
    FireTime,
    Preview,
    ScheduleCreated,
    ScheduleOut,
    SchedulePage,
    ScheduleResumed,
    SecretRotated,
)
from cronwire.api.schemas_access import RevisionList
from cronwire.api.schemas_commands import BackfillIn, BackfillOut, PauseIn, ResumeIn
from cronwire.api.schemas_runs import RunOut
from cronwire.api.schemas_schedule_input import ScheduleCreate, SchedulePatch
from cronwire.api.versions import IfMatch, parse_if_match, tag
from cronwire.domain.access import Scope
from cronwire.domain.backfill import MAX_BACKFILL, BackfillRequest
from cronwire.domain.cron import load_timezone
from cronwire.domain.keyset import decode_id_cursor, encode_id_cursor
from cronwire.domain.schedule_rules import PREVIEW_MAX, parse_overlap_policy
from cronwire.service import calendar_commands, run_commands
from cronwire.service import schedule_commands as commands

ScheduleId = Annotated[uuid.UUID, Path(alias="id", description="The schedule's id.")]
Version = Annotated[int, Path(ge=1, le=2**62, description="A version of the schedule.")]
MAX_REVISIONS = 1000


def schedules_router(ctx: ApiContext) -> APIRouter:
    router = APIRouter(prefix="/v1/schedules", tags=["schedules"],
                       route_class=capped_route(ctx.max_request_bytes,
                                               request_authenticator(ctx.tokens)))
    authenticated = caller_dependency(ctx.tokens, ctx.rate_limit)
    # Each handler's caller parameter declares the scope it needs (CONTRACT: read every
    # GET; write every change to schedules and runs; admin tokens, alerts, audit).
    Reader = Annotated[Caller, Security(authenticated, scopes=[Scope.READ])]
    Writer = Annotated[Caller, Security(authenticated, scopes=[Scope.WRITE])]

    @router.post("", status_code=201, response_model=ScheduleCreated,
                 summary="Create a schedule (the signing secret is shown only here)",
                 responses=responses(413, 422, 429))
    async def create(body: ScheduleCreate, caller: Writer, response: Response) -> dict[str, Any]:
        record = await commands.create_schedule(
            ctx.schedules, ctx.check_url, ctx.default_limits, caller.tenant_id, spec_from(body),
            paused=body.paused, change=caller.change)
        response.headers["Location"] = f"/v1/schedules/{record.id}"
        tag(response, record.version)
        return {**schedule_out(record), "signing_secret": record.signing_secret}

    @router.get("", response_model=SchedulePage, summary="List schedules (keyset pages by id)",
                responses=responses(422))
    async def list_schedules(
        caller: Reader,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        cursor: Annotated[str | None, Query(max_length=200)] = None,
    ) -> dict[str, Any]:
        after = decode_id_cursor(cursor) if cursor else None
        page = await commands.list_schedules(ctx.schedules, caller.tenant_id, after=after,
                                             limit=limit)
        return {"items": [schedule_out(r) for r in page.items],
                "next_cursor": encode_id_cursor(page.items[-1].id) if page.more else None}

    @router.get("/{id}", response_model=ScheduleOut, summary="Get a schedule",
                responses=responses(404, 422))
    async def get(schedule_id: ScheduleId, caller: Reader, response: Response) -> dict[str, Any]:
        record = await commands.get_schedule(ctx.schedules, caller.tenant_id, schedule_id)
        tag(response, record.version)
        return schedule_out(record)

    @router.patch("/{id}", response_model=ScheduleOut, responses=responses(404, 412, 413, 422),
                  summary="Edit a schedule (JSON merge patch); new timing recomputes "
                  "next_fire_at, no duplicates",
                  description="A JSON merge patch (RFC 7396, `application/json` or "
                  "`application/merge-patch+json`): only the fields present change, and "
                  "`target` and `retry` are merged field by field (`target.headers` name by "
                  "name; a null header value removes that header). null resets "
                  "`target.method` (POST), `target.body` (the default JSON body) and the "
                  "`retry` numbers to their defaults and removes `starts_at`/`ends_at`; it "
                  "is refused for fields a schedule cannot lack. A new `cron`, `timezone`, "
                  "`starts_at` or `ends_at` moves `next_fire_at` to the first occurrence "
                  "after both now and the last occurrence already planned, so nothing is "
                  "planned twice.")
    async def patch(schedule_id: ScheduleId, body: SchedulePatch, caller: Writer,
                    response: Response, if_match: IfMatch = None) -> dict[str, Any]:
        record = await commands.patch_schedule(
            ctx.schedules, ctx.check_url, ctx.default_limits, caller.tenant_id, schedule_id,
            lambda spec: patched_spec(spec, body), new_url=url_changed(body),
            change=caller.change, if_match=parse_if_match(if_match))
        tag(response, record.version)
        return schedule_out(record)

    @router.delete("/{id}", status_code=204, response_class=Response,
                   responses=responses(404, 412, 422),
                   summary="Delete (soft): stops firing, cancels runs not yet started; "
                   "history stays readable",
                   description="The schedule stops firing and disappears from reads and "
                   "lists (404 afterwards). Its `pending` and `retrying` runs become "
                   "`cancelled`; a `running` run (its request may be on the wire) finishes "
                   "normally. Every run stays readable under `/v1/runs`.")
    async def delete(schedule_id: ScheduleId, caller: Writer,
                     if_match: IfMatch = None) -> Response:
        await commands.delete_schedule(ctx.schedules, caller.tenant_id, schedule_id,
                                       change=caller.change, if_match=parse_if_match(if_match))
        return Response(status_code=204)

    @router.post("/{id}/pause", response_model=ScheduleOut, summary="Pause firing",
                 responses=responses(404, 409, 412, 422),
                 description="No new runs are planned, and the occurrences the planner "
                 "already wrote ahead are taken back (a run already started finishes). An "
                 "optional body `{\"note\": \"...\"}` is kept as `paused_reason`. A "
                 "completed schedule cannot be paused (409).")
    async def pause(schedule_id: ScheduleId, caller: Writer, response: Response,
                    body: PauseIn | None = None, if_match: IfMatch = None) -> dict[str, Any]:
        note = body.note if body is not None else None
        record = await commands.set_paused(ctx.schedules, caller.tenant_id, schedule_id,
                                           paused=True, note=note, change=caller.change,
                                           if_match=parse_if_match(if_match))
        tag(response, record.version)
        return schedule_out(record)

    @router.post("/{id}/resume", response_model=ScheduleResumed,
                 responses=responses(404, 409, 412, 422),
                 summary="Resume; occurrences missed meanwhile follow the misfire policy",
                 description="`next_fire_at` is left where the pause found it, so the "
                 "occurrences missed while paused are handled by `misfire_policy` "
                 "(`fire_all` within `catchup_window_seconds`, `fire_once`, or `skip`; "
                 "skipped ones appear in the history as `skipped` runs). `runs_due` says how "
                 "many runs that makes due at once; `{\"dry_run\": true}` only counts them. "
                 "Clears `paused_reason` and `consecutive_failures`. A completed schedule "
                 "cannot be resumed (409): give it a new `at` or a higher `max_runs`.")
    async def resume(schedule_id: ScheduleId, caller: Writer, response: Response,
                     body: ResumeIn | None = None, if_match: IfMatch = None) -> dict[str, Any]:
        dry_run = body is not None and body.dry_run
        exclusions = await calendar_commands.exclusions_of(
            ctx.schedules, ctx.calendars, caller.tenant_id, schedule_id)
        record, due = await commands.resume(ctx.schedules, caller.tenant_id, schedule_id,
                                            dry_run=dry_run, cpu=ctx.cpu, change=caller.change,
                                            if_match=parse_if_match(if_match),
                                            exclusions=exclusions)
        tag(response, record.version)
        return {**schedule_out(record), "runs_due": due, "dry_run": dry_run}

    @router.post("/{id}/trigger", status_code=202, response_model=RunOut,
                 responses=responses(404, 422), summary="Run now (a manual run, due at once)",
                 description="Works on paused schedules too. The run's `scheduled_for` is "
                 "the database clock with a non-zero microsecond part, so it never takes "
                 "the slot of a cron occurrence (those are whole seconds).")
    async def trigger(schedule_id: ScheduleId, caller: Writer) -> dict[str, Any]:
        return run_out(await commands.trigger_run(ctx.schedules, ctx.default_limits,
                                                  caller.tenant_id, schedule_id, caller.change))

    @router.post("/{id}/backfill", status_code=202, response_model=BackfillOut,
                 responses={**responses(404, 422),
                            200: {"model": BackfillOut, "description": "A dry run."}},
                 summary="Runs for the occurrences of [start, end) that have none",
                 description="Every occurrence of the schedule in `[start, end)` (its cron, "
                 "time zone and DST rules, within `starts_at`/`ends_at`) that has no run "
                 "gets one, `trigger: \"backfill\"`, due now; an occurrence that already "
                 "has a run keeps it (one run per occurrence). The runs are fair to other "
                 "tenants (the claim takes each tenant's runs in turn) and are gated by "
                 "`overlap_policy` (default: the schedule's). At most "
                 f"{MAX_BACKFILL:,} occurrences per request (422 `max_backfill_occurrences` "
                 "beyond); `end` not later than now; `start` within the run history kept. "
                 "`dry_run: true` writes nothing and answers 200.")
    async def backfill(schedule_id: ScheduleId, body: BackfillIn, caller: Writer,
                       response: Response) -> dict[str, Any]:
        policy = parse_overlap_policy(body.overlap_policy) if body.overlap_policy else None
        exclusions = await calendar_commands.exclusions_of(
            ctx.schedules, ctx.calendars, caller.tenant_id, schedule_id)
        result = await run_commands.backfill(
            ctx.commands, ctx.default_limits, caller.tenant_id, schedule_id,
            BackfillRequest(body.start, body.end, policy, body.dry_run), caller.change,
            exclusions)
        if result.dry_run:
            response.status_code = 200
        return {"occurrences": result.occurrences, "created": result.created,
                "existing": result.existing, "first": result.first,
                "over_limit": result.over_limit}

    @router.get("/{id}/preview", response_model=Preview, responses=responses(404, 422),
                summary="The next fire times, in UTC and in the schedule's zone")
    async def preview_fires(
        schedule_id: ScheduleId, caller: Reader,
        count: Annotated[int, Query(ge=1, le=PREVIEW_MAX)] = 10,
    ) -> dict[str, Any]:
        record, _, fires = await calendar_commands.preview_with_calendars(
            ctx.schedules, ctx.calendars, caller.tenant_id, schedule_id, count, ctx.cpu)
        zone = load_timezone(record.spec.timezone)
        return {"items": [FireTime(utc=v.at, local=v.at.astimezone(zone).isoformat(),
                                   skipped=v.skip, calendar=v.calendar,
                                   shifted_from=v.day if v.shifted else None)
                          for v in fires]}

    @router.post("/{id}/rotate-secret", response_model=SecretRotated,
                 responses=responses(404, 422),
                 summary="New signing secret; the old one also signs for 24 hours")
    async def rotate_secret(schedule_id: ScheduleId, caller: Writer) -> dict[str, Any]:
        record = await commands.rotate_secret(ctx.schedules, caller.tenant_id, schedule_id,
                                              ctx.secret_overlap_seconds, caller.change)
        return {"schedule_id": record.id, "signing_secret": record.signing_secret,
                "previous_secret_expires_at": record.previous_secret_expires_at}

    @router.get("/{id}/revisions", response_model=RevisionList, responses=responses(404, 422),
                summary="The schedule's versions, newest first: when, by whom, what changed")
    async def revisions(
        schedule_id: ScheduleId, caller: Reader,
        limit: Annotated[int, Query(ge=1, le=MAX_REVISIONS)] = 100,
    ) -> dict[str, Any]:
        found = await commands.list_revisions(ctx.schedules, caller.tenant_id, schedule_id,
                                              limit)
        return {"items": [{"version": r.version, "at": r.at, "actor": r.actor,
                           "changes": r.changes} for r in found]}

    @router.post("/{id}/revisions/{version}/restore", response_model=ScheduleOut,
                 responses=responses(404, 412, 422),
                 summary="Make an earlier version's definition current (a new version)",
                 description="The definition (every field a PATCH can change) becomes that "
                 "version's again, validated like an edit; pause state and the signing "
                 "secret stay as they are. `If-Match` applies as for PATCH.")
    async def restore(schedule_id: ScheduleId, version: Version, caller: Writer,
                      response: Response, if_match: IfMatch = None) -> dict[str, Any]:
        record = await commands.restore_revision(
            ctx.schedules, ctx.check_url, ctx.default_limits, caller.tenant_id, schedule_id,
            version, change=caller.change, if_match=parse_if_match(if_match))
        tag(response, record.version)
        return schedule_out(record)

    return router
