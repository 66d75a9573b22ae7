-- The nonce log (custody_core::auth::nonce_set): the nonces the serving process accepted and
-- checked itself (reads' nonces in batches, mutations' in their command's transaction) are
-- appended here, and read back into memory at the next start. The nonces table stays for the
-- nonces whose uniqueness the store decides (its primary key). Keyed by nonce, every insert
-- there lands on a random page, which the next group commit writes whole to the WAL; here the
-- rows and their expiry index append.
CREATE TABLE nonce_log (
    credential_id TEXT    NOT NULL,
    nonce         TEXT    NOT NULL,
    expires_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX nonce_log_by_expiry ON nonce_log (expires_at);
