-- Schedules as code (ADR 0057): a tenant's own name for a schedule (`key`,
-- unique among its live schedules) and the label of the tool that manages it
-- (`managed_by`). Both optional: a schedule made by hand has neither.
ALTER TABLE schedule ADD COLUMN key text;
ALTER TABLE schedule ADD COLUMN managed_by text;

-- The same rules as domain/schedule_keys.py: a key is a slug; a label is short text.
ALTER TABLE schedule ADD CONSTRAINT schedule_key_format
    CHECK (key ~ '^[a-z0-9][a-z0-9._-]{0,127}$');
ALTER TABLE schedule ADD CONSTRAINT schedule_managed_by_length
    CHECK (char_length(managed_by) BETWEEN 1 AND 200);

-- One live schedule per (tenant, key): a deleted schedule gives its key back. The
-- store turns a violation into 409 naming the key. Also the index PUT/GET/DELETE by key
-- and apply's read of the listed keys use.
CREATE UNIQUE INDEX schedule_tenant_key_idx ON schedule (tenant_id, key)
    WHERE key IS NOT NULL AND status <> 'deleted';

-- apply --prune reads the schedules one tool manages.
CREATE INDEX schedule_tenant_managed_by_idx ON schedule (tenant_id, managed_by)
    WHERE managed_by IS NOT NULL AND status <> 'deleted';
