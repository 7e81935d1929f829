-- Operators name a token by an id (`cronwire tenant tokens` / `tenant revoke`), never by the
-- token or its hash. The prefix (the first characters of the token) lets someone holding a
-- token find its id; it is NULL for tokens issued before this migration. A token is 256
-- random bits, so the few bits the prefix shows leave it unguessable.
ALTER TABLE api_token ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE api_token ADD COLUMN prefix text;
CREATE UNIQUE INDEX api_token_id_idx ON api_token (id);
