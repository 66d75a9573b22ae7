-- The nonce fence (custody_core::auth::nonce_set): reads' nonces are accepted in memory and
-- logged in batches; each batch writes, in its own transaction, the band of timestamps that a
-- nonce accepted since may carry. After an unclean stop the next process refuses requests signed
-- within [low_s, high_s]. One row.
CREATE TABLE nonce_fence (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    low_s INTEGER NOT NULL,
    high_s INTEGER NOT NULL,
    clean INTEGER NOT NULL CHECK (clean IN (0, 1))
);

-- Changes whenever a credential is created, changed (revoked, its TOTP step) or removed, by any
-- process: the server caches opened credentials and checks this number on every request, so a
-- revocation by `custody credentials revoke` takes effect on the next request.
CREATE TABLE credentials_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n INTEGER NOT NULL
);
INSERT INTO credentials_version (id, n) VALUES (1, 0);
CREATE TRIGGER credentials_version_insert AFTER INSERT ON credentials
BEGIN
    UPDATE credentials_version SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER credentials_version_update AFTER UPDATE ON credentials
BEGIN
    UPDATE credentials_version SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER credentials_version_delete AFTER DELETE ON credentials
BEGIN
    UPDATE credentials_version SET n = n + 1 WHERE id = 1;
END;
