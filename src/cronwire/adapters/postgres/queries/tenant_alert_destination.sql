-- tenant_alert_destination: where a tenant's alert events go (ADR 0036). $1 is tenant_id.

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

-- name: tenant_alert_destination_unsealed_lock
-- Start-up's sealing pass (ADR 0061): destinations whose secret is not sealed yet.
SELECT tenant_id, signing_secret FROM tenant_alert_destination
WHERE tenant_id > $1 AND signing_secret NOT LIKE 'cws1:%'
ORDER BY tenant_id
LIMIT $2
FOR UPDATE

-- name: tenant_alert_destination_seal
UPDATE tenant_alert_destination AS d SET signing_secret = u.signing_secret
FROM unnest($1::uuid[], $2::text[]) AS u(tenant_id, signing_secret)
WHERE d.tenant_id = u.tenant_id

-- name: tenant_alert_destination_lock
-- The destination a PUT replaces, as it was (the audit log's "before"), locked.
SELECT url, events FROM tenant_alert_destination WHERE tenant_id = $1 FOR UPDATE
