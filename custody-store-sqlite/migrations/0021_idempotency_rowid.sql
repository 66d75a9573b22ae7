-- Idempotency records move to a rowid table with (tenant, key) in a unique index. Keys are
-- client strings, so every record lands on a random page of the key's b-tree; in the WITHOUT
-- ROWID table that b-tree also held each stored response (a few hundred bytes), so a page took
-- about ten records and split every few inserts, and each split wrote new pages to the WAL at
-- the next group commit. Now the key's b-tree holds the key alone, and the records append.
CREATE TABLE idempotency_records (
    tenant      TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    fingerprint BLOB    NOT NULL,
    status      INTEGER NOT NULL,
    body        BLOB    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    UNIQUE (tenant, key)
) STRICT;
INSERT INTO idempotency_records (tenant, key, fingerprint, status, body, created_at, expires_at)
    SELECT tenant, key, fingerprint, status, body, created_at, expires_at
    FROM idempotency;
DROP TABLE idempotency;
ALTER TABLE idempotency_records RENAME TO idempotency;
CREATE INDEX idempotency_by_expiry ON idempotency (expires_at);
