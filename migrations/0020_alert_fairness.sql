-- Alerts fair between tenants (issue 46).
--
-- Flap damping: a schedule sends at most one schedule.failing/schedule.recovered pair per
-- 60 s. The window opens when a failing event is sent (alert_flap_window_start); inside
-- it a later failing is not sent, nor a recovered the tenant does not need (it was told
-- recovered already); each such flip adds one to alert_suppressed_flips, which the next
-- failing or recovered event that is sent carries in its detail. alert_told_failing is
-- the state the tenant was last told (alert_failing is the state itself).
ALTER TABLE schedule
    ADD COLUMN alert_told_failing      boolean     NOT NULL DEFAULT false,
    ADD COLUMN alert_flap_window_start timestamptz,
    ADD COLUMN alert_suppressed_flips  integer     NOT NULL DEFAULT 0
        CHECK (alert_suppressed_flips >= 0);
-- A failing schedule today was told so by its failing event.
UPDATE schedule SET alert_told_failing = true WHERE alert_failing;

-- The claim takes events per tenant in turn, a few each: per tenant, its due events in
-- order, and how many of its deliveries are in flight.
CREATE INDEX alert_event_tenant_due_idx ON alert_event (tenant_id, fire_after)
    WHERE status IN ('pending', 'retrying', 'delivering');
-- Retention deletes the oldest rows first, in bounded batches.
CREATE INDEX alert_event_created_idx ON alert_event (created_at);
-- Failing while the tenant was last told recovered (the flip was damped): the periodic
-- check tells it once the window has passed; nearly always empty.
CREATE INDEX schedule_alert_untold_idx ON schedule (id)
    WHERE alert_failing AND NOT alert_told_failing;
