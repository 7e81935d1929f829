-- schedule_revision: a schedule's definition at each version (GET .../revisions, restore).

-- name: schedule_revision_insert
INSERT INTO schedule_revision (tenant_id, schedule_id, version, actor, action, changes,
                               definition)
VALUES ($1, $2, $3, $4, $5, $6, $7)

-- name: schedule_revision_list
-- Newest first, at most $3 (the primary key (schedule_id, version) serves it).
SELECT version, at, actor, changes
  FROM schedule_revision
 WHERE tenant_id = $1 AND schedule_id = $2
 ORDER BY version DESC
 LIMIT $3

-- name: schedule_revision_get
SELECT version, definition
  FROM schedule_revision
 WHERE tenant_id = $1 AND schedule_id = $2 AND version = $3

-- name: schedule_revision_delete_expired
-- Retention (SCHEDULER_AUDIT_RETENTION_DAYS, like the audit log): up to $2 revisions
-- older than $1 days; the caller repeats while a batch comes back full.
WITH expired AS (
    SELECT schedule_id, version
      FROM schedule_revision
     WHERE at < now() - make_interval(days => $1)
     ORDER BY at
     LIMIT $2
)
DELETE FROM schedule_revision r
 USING expired
 WHERE (r.schedule_id, r.version) = (expired.schedule_id, expired.version)
