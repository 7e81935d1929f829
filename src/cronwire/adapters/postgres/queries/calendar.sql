-- calendar: a tenant's holiday and business-day calendars (ADR 0064, migration 0028).
-- Every API statement is confined to one tenant ($1 is always tenant_id): a foreign id
-- matches no row and reads as "not found".

-- name: calendar_lock_tenant_count
-- The tenant row locked (creates of one tenant's calendars run one after another, so
-- the per-tenant cap is exact) with how many calendars it has.
SELECT t.id, (SELECT count(*) FROM calendar c WHERE c.tenant_id = t.id) AS calendars
FROM tenant t WHERE t.id = $1
FOR UPDATE OF t

-- name: calendar_insert
-- $1 id, $2 tenant, $3 name, $4 dates, $5 the holidays source (NULL: dates by hand).
-- A name the tenant already uses violates calendar_tenant_name_idx (409).
INSERT INTO calendar (id, tenant_id, name, dates, holidays)
VALUES ($1, $2, $3, $4, $5)
RETURNING id, tenant_id, name, dates, holidays, created_at, updated_at

-- name: calendar_get
SELECT id, tenant_id, name, dates, holidays, created_at, updated_at
FROM calendar WHERE tenant_id = $1 AND id = $2

-- name: calendar_lock
-- The row an edit or a delete changes, after the schedules that exclude it
-- (schedule_lock_by_calendar): schedules first, then calendars, as a schedule's own
-- edit takes them (calendar_share), so the two never wait on each other in a circle.
SELECT id, tenant_id, name, dates, holidays, created_at, updated_at, now() AS db_now
FROM calendar WHERE tenant_id = $1 AND id = $2
FOR UPDATE

-- name: calendar_list
-- A tenant's calendars by name (at most its cap, 100).
SELECT id, tenant_id, name, dates, holidays, created_at, updated_at
FROM calendar WHERE tenant_id = $1
ORDER BY name
LIMIT $2

-- name: calendar_update
UPDATE calendar SET name = $3, dates = $4, holidays = $5, updated_at = now()
WHERE tenant_id = $1 AND id = $2
RETURNING id, tenant_id, name, dates, holidays, created_at, updated_at

-- name: calendar_delete
DELETE FROM calendar WHERE tenant_id = $1 AND id = $2

-- name: calendar_share
-- The calendars a schedule's write excludes ($2), the tenant's only, held against a
-- delete or an edit until the schedule's transaction ends.
SELECT id, name, dates FROM calendar
WHERE tenant_id = $1 AND id = ANY($2::uuid[])
FOR SHARE

-- name: calendar_dates_of
-- The planner's read of the calendars its claimed schedules exclude (no lock: an edit
-- re-plans the schedules afterwards, under their own locks). Bounded by the claim's
-- batch times 10 ids, each row by its 1000 dates.
SELECT id, tenant_id, name, dates FROM calendar WHERE id = ANY($1::uuid[])

-- name: calendar_read_for
-- The calendars one schedule excludes (a preview, an explain, a backfill), no lock.
SELECT id, name, dates FROM calendar
WHERE tenant_id = $1 AND id = ANY($2::uuid[])
