-- Holiday and business-day calendars (ADR 0064): a tenant's named sets of dates, and the
-- schedule columns that exclude them.
--
-- The dates sit in the row as one array: the planner reads a schedule's calendars by
-- primary key and needs all their dates at once. Every size a tenant controls is
-- bounded here as in domain/calendar_specs.py, so no tenant's calendar can make the
-- planner's statement slow: a name of at most 100 characters, at most 1000 dates, a
-- generating source of at most 2 kB. How many calendars a tenant keeps (100) is counted
-- by the calendar store under the tenant's lock.
CREATE TABLE calendar (
    id          uuid        PRIMARY KEY,
    tenant_id   uuid        NOT NULL REFERENCES tenant (id) ON DELETE CASCADE,
    name        text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    dates       date[]      NOT NULL DEFAULT '{}' CHECK (cardinality(dates) <= 1000),
    -- {"country", "subdivision", "years"}: what the dates were generated from (the
    -- holidays package), NULL for dates given by hand.
    holidays    jsonb       CHECK (pg_column_size(holidays) <= 2048),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Names are unique per tenant (409 on a second one), and a tenant's list reads this.
CREATE UNIQUE INDEX calendar_tenant_name_idx ON calendar (tenant_id, name);

-- The calendars a schedule excludes (at most 10; the store checks they are the
-- tenant's own) and what an excluded occurrence becomes. Constant defaults: nothing is
-- rewritten.
ALTER TABLE schedule
    ADD COLUMN exclude_calendars uuid[] NOT NULL DEFAULT '{}'
        CHECK (cardinality(exclude_calendars) <= 10),
    ADD COLUMN calendar_policy text NOT NULL DEFAULT 'skip'
        CHECK (calendar_policy IN ('skip', 'next_business_day', 'previous_business_day'));
