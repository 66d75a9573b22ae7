-- Webhook delivery: one endpoint per tenant (secret sealed), claims on outbox rows, and every
-- attempt for the admin listing. Times are Unix milliseconds.

CREATE TABLE webhook_endpoints (
    tenant        TEXT    PRIMARY KEY,
    url           TEXT    NOT NULL,
    secret_sealed BLOB    NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;

-- A claimed event is not handed out again before leased_until (NULL: not claimed). Claims
-- are released when the attempt is recorded; a crashed worker's simply run out (never released in bulk).
ALTER TABLE outbox ADD COLUMN leased_until INTEGER;
CREATE INDEX outbox_due_by_tenant ON outbox (tenant, status, next_attempt_at);
CREATE INDEX outbox_claimed ON outbox (tenant, leased_until) WHERE leased_until IS NOT NULL;
CREATE INDEX outbox_by_time ON outbox (created_at);

CREATE TABLE webhook_attempts (
    id          INTEGER PRIMARY KEY,
    event_id    TEXT    NOT NULL REFERENCES outbox (id),
    at          INTEGER NOT NULL,
    url         TEXT    NOT NULL,
    status_code INTEGER CHECK (status_code IS NULL OR status_code BETWEEN 100 AND 999),
    error       TEXT,
    latency_ms  INTEGER NOT NULL CHECK (latency_ms >= 0)
) STRICT;
CREATE INDEX webhook_attempts_by_event ON webhook_attempts (event_id, id);
