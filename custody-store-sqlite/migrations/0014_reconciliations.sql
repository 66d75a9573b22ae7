-- Reconciliation runs (decisions §8, §14): scheduled by POST /admin/reconcile or the schedule,
-- claimed under a lease (leased_until) by one runner at a time, then completed or failed.

CREATE TABLE reconciliations (
    id             TEXT    PRIMARY KEY,
    scope          TEXT    NOT NULL CHECK (scope IN ('LEDGER', 'TREASURY')),
    status         TEXT    NOT NULL CHECK (status IN ('scheduled', 'running', 'completed', 'failed')),
    balanced       INTEGER CHECK (balanced IN (0, 1)),
    -- A JSON array; amounts inside are strings (u128).
    discrepancies  TEXT    NOT NULL,
    requested_by   TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    completed_at   INTEGER,
    failure_reason TEXT,
    leased_until   INTEGER
) STRICT;
-- Listing (newest first) and the latest per scope.
CREATE INDEX reconciliations_by_time ON reconciliations (created_at);
CREATE INDEX reconciliations_by_scope ON reconciliations (scope, created_at);
-- What a runner claims: the unfinished ones.
CREATE INDEX reconciliations_due ON reconciliations (status, created_at)
    WHERE status IN ('scheduled', 'running');
