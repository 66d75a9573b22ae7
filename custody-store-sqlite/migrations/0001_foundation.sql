-- Credentials, nonces, idempotency records, the webhook outbox and the audit trail.
-- Times are Unix milliseconds (INTEGER); secrets are sealed BLOBs; ids are UUID TEXT.

CREATE TABLE credentials (
    id                 TEXT    PRIMARY KEY,
    api_key            TEXT    NOT NULL UNIQUE,
    tenant             TEXT    NOT NULL,
    scopes             TEXT    NOT NULL,
    admin              INTEGER NOT NULL CHECK (admin IN (0, 1)),
    rate_limit         INTEGER NOT NULL CHECK (rate_limit > 0),
    hmac_secret_sealed BLOB    NOT NULL,
    pin_hash           TEXT,
    totp_secret_sealed BLOB,
    totp_last_step     INTEGER,
    created_at         INTEGER NOT NULL,
    revoked_at         INTEGER
) STRICT;

CREATE TABLE nonces (
    credential_id TEXT    NOT NULL,
    nonce         TEXT    NOT NULL,
    expires_at    INTEGER NOT NULL,
    PRIMARY KEY (credential_id, nonce)
) STRICT, WITHOUT ROWID;
CREATE INDEX nonces_by_expiry ON nonces (expires_at);

CREATE TABLE idempotency (
    tenant      TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    fingerprint BLOB    NOT NULL,
    status      INTEGER NOT NULL,
    body        BLOB    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, key)
) STRICT, WITHOUT ROWID;
CREATE INDEX idempotency_by_expiry ON idempotency (expires_at);

CREATE TABLE outbox (
    id              TEXT    PRIMARY KEY,
    tenant          TEXT    NOT NULL,
    event_type      TEXT    NOT NULL,
    body            BLOB    NOT NULL,
    created_at      INTEGER NOT NULL,
    status          TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'dead_lettered')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT,
    updated_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX outbox_due ON outbox (status, next_attempt_at);

CREATE TABLE audit (
    id         TEXT    PRIMARY KEY,
    actor      TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    target     TEXT    NOT NULL,
    old_value  TEXT,
    new_value  TEXT,
    reason     TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX audit_by_time ON audit (created_at);
