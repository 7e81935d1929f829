-- secret_data_key: each tenant's data key, wrapped by the key ring (ADR 0061).

-- name: secret_data_key_for_tenants
SELECT id, tenant_id, key_id, wrapped FROM secret_data_key WHERE tenant_id = ANY($1::uuid[])

-- name: secret_data_key_insert
-- Two replicas sealing a tenant's first secret at once: the first insert stays, and both
-- read it back (the second's own key is dropped before it sealed anything).
WITH inserted AS (
    INSERT INTO secret_data_key (id, tenant_id, key_id, wrapped)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (tenant_id) DO NOTHING
    RETURNING id, tenant_id, key_id, wrapped
)
SELECT id, tenant_id, key_id, wrapped FROM inserted
UNION ALL
SELECT id, tenant_id, key_id, wrapped FROM secret_data_key
WHERE tenant_id = $2 AND NOT EXISTS (SELECT 1 FROM inserted)

-- name: secret_data_key_count_by_key_id
SELECT key_id, count(*) AS data_keys FROM secret_data_key GROUP BY key_id ORDER BY key_id

-- name: secret_data_key_not_wrapped_by
-- $1 the sealing key id, $2 the last id of the previous batch, $3 batch size.
SELECT id, tenant_id, key_id, wrapped FROM secret_data_key
WHERE key_id <> $1 AND id > $2
ORDER BY id
LIMIT $3

-- name: secret_data_key_rewrap
-- Conditional on the key id read: a concurrent rotation's write is never overwritten.
UPDATE secret_data_key AS k
SET key_id = r.new_key_id, wrapped = r.wrapped, rewrapped_at = now()
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[])
     AS r(id, old_key_id, new_key_id, wrapped)
WHERE k.id = r.id AND k.key_id = r.old_key_id

-- name: secret_data_key_one_per_key_id
SELECT DISTINCT ON (key_id) id, tenant_id, key_id, wrapped
FROM secret_data_key ORDER BY key_id, id
