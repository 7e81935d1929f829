-- tenant_alert_destination: where a tenant's alert events go (issue 26). $1 is tenant_id.

-- name: tenant_alert_destination_upsert
-- $2 url, $3 event types, $4 the new signing secret (a PUT replaces the destination whole).
INSERT INTO tenant_alert_destination (tenant_id, url, events, signing_secret)
VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant_id) DO UPDATE
   SET url = EXCLUDED.url, events = EXCLUDED.events, signing_secret = EXCLUDED.signing_secret,
       updated_at = now()
RETURNING tenant_id, url, events, signing_secret, created_at, updated_at

-- name: tenant_alert_destination_get
SELECT tenant_id, url, events, signing_secret, created_at, updated_at
  FROM tenant_alert_destination WHERE tenant_id = $1
