-- Sealed secrets (issue 47, ADR 0061): one data key per tenant, wrapped by the operator's
-- key ring. The key ring never reaches the database, so this migration cannot seal what is
-- already stored: the replica's start-up does that after migrating (bootstrap/sealing.py),
-- in batches, idempotently, for values not yet in the sealed format ("cws1:...").
CREATE TABLE secret_data_key (
    id           uuid        PRIMARY KEY,
    tenant_id    uuid        NOT NULL UNIQUE REFERENCES tenant (id) ON DELETE CASCADE,
    -- the key ring entry that wraps it (SCHEDULER_SECRET_KEYS' KEY_ID)
    key_id       text        NOT NULL CHECK (length(key_id) BETWEEN 1 AND 64),
    -- AES-256-GCM: 12-byte nonce, then the 32-byte data key's ciphertext and 16-byte tag
    wrapped      bytea       NOT NULL CHECK (length(wrapped) = 60),
    created_at   timestamptz NOT NULL DEFAULT now(),
    rewrapped_at timestamptz
);

-- `cronwire keys rotate` walks the data keys not under the first key, by id.
CREATE INDEX secret_data_key_key_id_idx ON secret_data_key (key_id, id);
